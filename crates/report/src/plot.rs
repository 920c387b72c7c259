//! SVG plots: line plots (model curves, MPI versus cache size) and scatter plots
//! (per-address-space samples).

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
}
