#!/usr/bin/env python3
"""Deterministic inputs for the Mult2-like workload recorded by generate.sh.

Every random choice comes from xoshiro256++ seeded through splitmix64, the generator of
../traces/gen_inputs.py (imported from there). Usage:

    gen_inputs.py SEED OUTDIR SCALE      (SCALE: quick or full)

writes into OUTDIR:
  src/fNN.c        C files of generated functions (the compile series)
  text.txt, text2.txt, small.txt   text for the UNIX commands
  chip.mag         a layout of random rectangles on four scmos layers (magic's DRC)
  tech.lef, chip.def   a three-metal technology, a row-placed array of standard cells
                   and a netlist of short nets (qrouter's detail route)
  sor.c            successive over-relaxation on a sparse matrix (Appendix A's Sor)
  tree.scm         a Scheme program that builds and searches a large tree (Tree)
  tv.cir           an RC interconnect network for a transient analysis (Tv)
  lin.cir          a resistive power-distribution grid for a transient analysis (Lin)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces"))
from gen_inputs import Xoshiro256pp, c_program, text, vocabulary  # noqa: E402

SCALES = {
    # files in the compile series, rectangles per magic layer, router rows and columns
    "quick": {"files": 6, "funcs": (1, 6), "rects": 2500, "cells": (48, 48), "lines": 400,
              "sor": 700, "tree": 200000, "chains": (120, 40), "grid": 90},
    "full": {"files": 6, "funcs": (2, 12), "rects": 6000, "cells": (90, 90), "lines": 3000,
             "sor": 900, "tree": 1000000, "chains": (400, 60), "grid": 180},
}


def write(path, content):
    with open(path, "w") as f:
        f.write(content)


def layout(rng, rects_per_layer):
    """A magic layout: random rectangles (lambda units) on poly, diffusion and two metals,
    dense enough that the design-rule checker finds spacing and overlap errors."""
    out = ["magic", "tech scmos", "timestamp 0"]
    side = int((rects_per_layer * 900) ** 0.5)
    for layer in ["polysilicon", "ndiffusion", "metal1", "metal2"]:
        out.append(f"<< {layer} >>")
        for _ in range(rects_per_layer):
            x, y = rng.below(side), rng.below(side)
            w, h = 2 + rng.below(30), 2 + rng.below(30)
            out.append(f"rect {x} {y} {x + w} {y + h}")
    out.append("<< end >>")
    return "\n".join(out) + "\n"


LEF = """VERSION 5.7 ;
BUSBITCHARS "[]" ;
DIVIDERCHAR "/" ;
UNITS
  DATABASE MICRONS 100 ;
END UNITS
MANUFACTURINGGRID 0.01 ;
{layers}
VIA via12 DEFAULT
  LAYER metal1 ;
    RECT -0.1 -0.1 0.1 0.1 ;
  LAYER via1 ;
    RECT -0.1 -0.1 0.1 0.1 ;
  LAYER metal2 ;
    RECT -0.1 -0.1 0.1 0.1 ;
END via12
VIA via23 DEFAULT
  LAYER metal2 ;
    RECT -0.1 -0.1 0.1 0.1 ;
  LAYER via2 ;
    RECT -0.1 -0.1 0.1 0.1 ;
  LAYER metal3 ;
    RECT -0.1 -0.1 0.1 0.1 ;
END via23
SITE core
  CLASS CORE ;
  SIZE 0.4 BY 4.0 ;
END core
MACRO cell
  CLASS CORE ;
  ORIGIN 0 0 ;
  SIZE 1.6 BY 4.0 ;
  SITE core ;
{pins}END cell
END LIBRARY
"""


def lef():
    layers = []
    for i, direction in enumerate(["HORIZONTAL", "VERTICAL", "HORIZONTAL"], start=1):
        layers.append(f"LAYER metal{i}\n  TYPE ROUTING ;\n  DIRECTION {direction} ;\n"
                      f"  PITCH 0.4 ;\n  WIDTH 0.2 ;\n  SPACING 0.2 ;\nEND metal{i}")
        if i < 3:
            layers.append(f"LAYER via{i}\n  TYPE CUT ;\nEND via{i}")
    pins = ""
    # Pin centres sit on the routing grid (tracks at 0.2 + 0.4k microns).
    for name, (x, y), d in [("A", (0.2, 1.0), "INPUT"), ("B", (0.6, 2.2), "INPUT"),
                            ("Y", (1.0, 1.8), "OUTPUT")]:
        pins += (f"  PIN {name}\n    DIRECTION {d} ;\n    PORT\n      LAYER metal1 ;\n"
                 f"        RECT {x - 0.15:.2f} {y - 0.15:.2f} {x + 0.15:.2f} {y + 0.15:.2f} ;\n"
                 f"    END\n  END {name}\n")
    return LEF.format(layers="\n".join(layers), pins=pins)


def placement(rng, rows, cols):
    """A DEF: rows x cols cells (2.4 micron pitch), each output driving one or two inputs
    of cells at most three rows or columns away; every input on at most one net."""
    unit = 100
    width, height = cols * 240, rows * 400
    out = ["VERSION 5.7 ;", 'DIVIDERCHAR "/" ;', 'BUSBITCHARS "[]" ;', "DESIGN chip ;",
           f"UNITS DISTANCE MICRONS {unit} ;", f"DIEAREA ( 0 0 ) ( {width} {height} ) ;"]
    for r in range(rows):
        out.append(f"ROW row{r} core 0 {r * 400} N DO {width // 40} BY 1 STEP 40 0 ;")
    out.append(f"TRACKS Y 20 DO {height // 40} STEP 40 LAYER metal1 ;")
    out.append(f"TRACKS X 20 DO {width // 40} STEP 40 LAYER metal2 ;")
    out.append(f"TRACKS Y 20 DO {height // 40} STEP 40 LAYER metal3 ;")
    out.append(f"COMPONENTS {rows * cols} ;")
    for r in range(rows):
        for c in range(cols):
            out.append(f"- u{r}_{c} cell + PLACED ( {c * 240} {r * 400} ) N ;")
    out.append("END COMPONENTS")

    def near(v, n):
        return min(n - 1, max(0, v + rng.below(7) - 3))

    used, nets = set(), []
    for r in range(rows):
        for c in range(cols):
            conns = [f"( u{r}_{c} Y )"]
            for _ in range(1 + rng.below(2)):
                for _ in range(20):
                    pin = (near(r, rows), near(c, cols), "AB"[rng.below(2)])
                    if pin not in used and pin[:2] != (r, c):
                        used.add(pin)
                        conns.append(f"( u{pin[0]}_{pin[1]} {pin[2]} )")
                        break
            if len(conns) > 1:
                nets.append(conns)
    out.append(f"NETS {len(nets)} ;")
    for i, conns in enumerate(nets):
        out.append(f"- n{i} " + " ".join(conns) + " ;")
    out += ["END NETS", "END DESIGN"]
    return "\n".join(out) + "\n"


SOR = r"""/* generated: successive over-relaxation of a 5-point Laplacian on an N x N grid,
   the matrix held in compressed sparse rows */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 500, rows = n * n, k = 0;
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    long *start = malloc((rows + 1) * sizeof *start);
    int *col = malloc(rows * 5 * sizeof *col);
    double *val = malloc(rows * 5 * sizeof *val), *x = calloc(rows, sizeof *x);
    double *b = malloc(rows * sizeof *b), w = 1.8, sum = 0;
    for (long i = 0; i < rows; i++) {
        long r = i / n, c = i % n;
        start[i] = k;
        long nb[5] = {i - n, i - 1, i, i + 1, i + n};
        int ok[5] = {r > 0, c > 0, 1, c < n - 1, r < n - 1};
        for (int j = 0; j < 5; j++)
            if (ok[j]) { col[k] = (int)nb[j]; val[k++] = j == 2 ? 4.0 : -1.0; }
        b[i] = (double)((i * 7919) % 1000) / 1000.0;
    }
    start[rows] = k;
    for (int it = 0; it < iters; it++)
        for (long i = 0; i < rows; i++) {
            double s = b[i], d = 1;
            for (long j = start[i]; j < start[i + 1]; j++)
                if (col[j] == i) d = val[j]; else s -= val[j] * x[col[j]];
            x[i] += w * (s / d - x[i]);
        }
    for (long i = 0; i < rows; i++) sum += x[i];
    printf("%f\n", sum);
    return 0;
}
"""

TREE = """;; generated: build a binary search tree of N pseudo-random keys, then search it
(define (lcg x) (modulo (+ (* x 1103515245) 12345) 2147483648))
(define (insert tree key)
  (if (null? tree) (vector key '() '())
      (let ((k (vector-ref tree 0)))
        (cond ((< key k) (vector-set! tree 1 (insert (vector-ref tree 1) key)) tree)
              ((> key k) (vector-set! tree 2 (insert (vector-ref tree 2) key)) tree)
              (else tree)))))
(define (member? tree key)
  (cond ((null? tree) #f)
        ((< key (vector-ref tree 0)) (member? (vector-ref tree 1) key))
        ((> key (vector-ref tree 0)) (member? (vector-ref tree 2) key))
        (else #t)))
(define (build n)
  (let loop ((i 0) (x 1) (t '()))
    (if (= i n) t (loop (+ i 1) (lcg x) (insert t x)))))
(define tree (build {n}))
(let loop ((i 0) (x 7) (found 0))
  (if (< i (* 4 {n})) (loop (+ i 1) (lcg x) (if (member? tree x) (+ found 1) found))
      (begin (display found) (newline))))
"""


def transient_network(rng, chains, segments):
    """RC interconnect: chains of resistor-capacitor segments driven by pulses, with
    coupling capacitors between neighbouring chains."""
    out = ["* generated: RC interconnect network, transient analysis"]
    for c in range(chains):
        out.append(f"V{c} d{c}_0 0 PULSE(0 1 {rng.below(50)}p 20p 20p 1n 2n)")
        for k in range(segments):
            r = 5 + rng.below(50)
            out.append(f"R{c}_{k} d{c}_{k} d{c}_{k + 1} {r}")
            out.append(f"C{c}_{k} d{c}_{k + 1} 0 {1 + rng.below(20)}f")
            if c > 0 and rng.below(4) == 0:
                out.append(f"X{c}_{k} d{c}_{k + 1} d{c - 1}_{k + 1} {1 + rng.below(5)}f".replace("X", "CC"))
    out += [".tran 10p 4n", f".print tran v(d0_{segments})", ".end"]
    return "\n".join(out) + "\n"


def power_grid(rng, side):
    """A resistive power-distribution grid: supplies at the corners, current drawn at
    random nodes (every time step is a large sparse linear solve)."""
    out = ["* generated: resistive power grid, operating point"]
    for r in range(side):
        for c in range(side):
            if c + 1 < side:
                out.append(f"RH{r}_{c} n{r}_{c} n{r}_{c + 1} {0.1 + rng.below(10) / 100:.2f}")
            if r + 1 < side:
                out.append(f"RV{r}_{c} n{r}_{c} n{r + 1}_{c} {0.1 + rng.below(10) / 100:.2f}")
            if rng.below(5) == 0:
                out.append(f"I{r}_{c} n{r}_{c} 0 {1 + rng.below(9)}m")
    for i, (r, c) in enumerate([(0, 0), (0, side - 1), (side - 1, 0), (side - 1, side - 1)]):
        out.append(f"VDD{i} n{r}_{c} 0 1.0")
    out += [".tran 1n 20n", f".print tran v(n{side // 2}_{side // 2})", ".end"]
    return "\n".join(out) + "\n"


def main():
    seed, outdir, scale = int(sys.argv[1]), sys.argv[2], SCALES[sys.argv[3]]
    os.makedirs(os.path.join(outdir, "src"), exist_ok=True)
    rng = Xoshiro256pp(seed)
    lo, hi = scale["funcs"]
    for i in range(scale["files"]):
        write(os.path.join(outdir, "src", f"f{i:02}.c"), c_program(rng, lo + rng.below(hi - lo + 1)))
    words = vocabulary(rng, 5000)
    lines = text(rng, words, 1 << 20)
    write(os.path.join(outdir, "text.txt"), "\n".join(lines) + "\n")
    edited = [l if rng.below(40) else " ".join(reversed(l.split())) for l in lines]
    write(os.path.join(outdir, "text2.txt"), "\n".join(edited) + "\n")
    write(os.path.join(outdir, "small.txt"), "\n".join(lines[:scale["lines"]]) + "\n")
    write(os.path.join(outdir, "chip.mag"), layout(rng, scale["rects"]))
    write(os.path.join(outdir, "tech.lef"), lef())
    write(os.path.join(outdir, "chip.def"), placement(rng, *scale["cells"]))
    write(os.path.join(outdir, "sor.c"), SOR)
    write(os.path.join(outdir, "tree.scm"), TREE.replace("{n}", str(scale["tree"])))
    write(os.path.join(outdir, "tv.cir"), transient_network(rng, *scale["chains"]))
    write(os.path.join(outdir, "lin.cir"), power_grid(rng, scale["grid"]))
    write(os.path.join(outdir, "sor.n"), str(scale["sor"]))


if __name__ == "__main__":
    main()
