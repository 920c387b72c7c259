//! SVG plots: line plots (model curves, MPI versus cache size), scatter plots
//! (per-address-space samples) and grouped bar charts (latency per file system).

use crate::{ReportError, create_parent};
use plotters::prelude::*;
use std::path::Path;

/// One named series of (x, y) points.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from a label and points.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            label: label.into(),
            points,
        }
    }
}

/// A plot of several series joined by lines.
#[derive(Clone, Debug)]
pub struct LinePlot {
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The series.
    pub series: Vec<Series>,
}

/// A plot of several series as unjoined markers, optionally with line series on top
/// (for a model curve drawn over samples).
#[derive(Clone, Debug)]
pub struct ScatterPlot {
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Series drawn as markers.
    pub points: Vec<Series>,
    /// Series drawn as lines.
    pub lines: Vec<Series>,
}

/// Grouped bars: for each category on the x axis, one bar per series.
#[derive(Clone, Debug)]
pub struct BarPlot {
    /// Caption.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// Names under the groups.
    pub categories: Vec<String>,
    /// (legend label, one value per category; NaN draws no bar).
    pub series: Vec<(String, Vec<f64>)>,
}

impl BarPlot {
    /// Renders the plot as SVG at `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        create_parent(path)?;
        let err = |e: &dyn std::fmt::Display| ReportError::new(path, e);
        let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let top = self
            .series
            .iter()
            .flat_map(|s| &s.1)
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        let top = if top > 0.0 { top * 1.1 } else { 1.0 };
        let n = self.categories.len().max(1);
        let cats = self.categories.clone();
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n as f64, 0.0..top)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - i as f64 - 0.5).abs() < 0.26 {
                    cats.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(&self.y_label)
            .draw()
            .map_err(|e| err(&e))?;
        let k = self.series.len().max(1) as f64;
        let width = 0.8 / k;
        for (j, (label, values)) in self.series.iter().enumerate() {
            let c = PALETTE[j % PALETTE.len()];
            let bars = values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(move |(i, &v)| {
                    let x0 = i as f64 + 0.1 + j as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.95, v)], c.filled())
                });
            chart
                .draw_series(bars)
                .map_err(|e| err(&e))?
                .label(label.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))
    }
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn bounds<'a>(series: impl Iterator<Item = &'a Series>) -> ((f64, f64), (f64, f64)) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in series.flat_map(|s| &s.points) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return ((0.0, 1.0), (0.0, 1.0));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    ((x0, x1), (y0, y1 * 1.05))
}

fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[Series],
    lines: &[Series],
) -> Result<(), ReportError> {
    create_parent(path)?;
    let err = |e: &dyn std::fmt::Display| ReportError::new(path, e);
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let ((x0, x1), (y0, y1)) = bounds(points.iter().chain(lines));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in points.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(|e| err(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, c.filled()));
    }
    for (i, s) in lines.iter().enumerate() {
        let c = PALETTE[(i + points.len()) % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

impl LinePlot {
    /// Renders the plot as SVG at `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        draw(
            path,
            &self.title,
            &self.x_label,
            &self.y_label,
            &[],
            &self.series,
        )
    }
}

impl ScatterPlot {
    /// Renders the plot as SVG at `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        draw(
            path,
            &self.title,
            &self.x_label,
            &self.y_label,
            &self.points,
            &self.lines,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_svg_with_series() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.svg");
        LinePlot {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series::new("model", vec![(0.0, 1.0), (1.0, 2.0)])],
        }
        .write_svg(&p)
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("model"));
        assert!(svg.contains("<polyline"));
    }

    #[test]
    fn writes_grouped_bars() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.svg");
        BarPlot {
            title: "t".into(),
            y_label: "us".into(),
            categories: vec!["open".into(), "create".into()],
            series: vec![
                ("PXFS".into(), vec![1.0, 2.0]),
                ("tmpfs".into(), vec![0.5, f64::NAN]),
            ],
        }
        .write_svg(&p)
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("PXFS") && svg.contains("create"), "{svg}");
        // One bar per finite value plus one legend swatch per series, in its colour.
        let fills = |c: &str| svg.matches(&format!("fill=\"{c}\"")).count();
        assert_eq!(fills("#1F77B4"), 3, "{svg}");
        assert_eq!(fills("#D62728"), 2, "{svg}");
    }
}
