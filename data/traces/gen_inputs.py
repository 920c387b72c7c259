#!/usr/bin/env python3
"""Deterministic inputs for the recorded traces in this directory.

Every random choice comes from xoshiro256++ seeded through splitmix64 (the same
generator pmlab uses everywhere, implemented here so the inputs need nothing but
python3). Usage: gen_inputs.py SEED OUTDIR  -> OUTDIR/{text.txt,text2.txt,prog.c}
"""
import os
import sys

M64 = (1 << 64) - 1


class Xoshiro256pp:
    """xoshiro256++ with its state filled by splitmix64(seed), as rand_xoshiro's seed_from_u64."""

    def __init__(self, seed):
        self.s = []
        x = seed & M64
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    def next(self):
        s = self.s
        result = (self.rotl((s[0] + s[3]) & M64, 23) + s[0]) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def below(self, n):
        return self.next() % n


SYLLABLES = ["ka", "to", "ri", "ne", "su", "mo", "la", "pe", "di", "vo", "gra", "sti",
             "on", "er", "al", "in", "que", "bar", "zen", "lo", "mi", "tra", "ce", "ul"]


def vocabulary(rng, n):
    words = set()
    while len(words) < n:
        k = 1 + rng.below(4)
        words.add("".join(SYLLABLES[rng.below(len(SYLLABLES))] for _ in range(k)))
    return sorted(words)


def zipf_word(rng, words):
    # Squaring a uniform draw skews choice towards the front: a few very common words
    # and a long tail, as in natural text.
    u = rng.below(1 << 30) / float(1 << 30)
    return words[int(u * u * len(words))]


def text(rng, words, nbytes):
    out, size = [], 0
    while size < nbytes:
        line = " ".join(zipf_word(rng, words) for _ in range(4 + rng.below(10)))
        out.append(line)
        size += len(line) + 1
    return out


def c_program(rng, nfuncs):
    parts = ["/* generated: deterministic compiler workload */",
             "struct node { long key; double w; struct node *next; };",
             "extern int printf(const char *, ...);"]
    for f in range(nfuncs):
        a, b, c = (1 + rng.below(97) for _ in range(3))
        body = [f"long f{f}(long n, struct node *p, double *v) {{",
                "  long acc = 0; double s = 0.0;",
                f"  for (long i = 0; i < n; i++) {{",
                f"    acc += (i * {a}) ^ (acc >> {1 + rng.below(7)});",
                f"    if (acc % {b} == {rng.below(b)}) s += v[i % {c}] * {rng.below(1000)}.5;",
                "    else if (p && p->key > i) { s -= p->w; p = p->next; }",
                f"    switch ((int)(acc & 7)) {{ case 0: acc += {a}; break; case 1: acc -= {b}; break;",
                f"      case 2: acc *= 3; break; case 3: acc ^= {c}; break; default: acc += i; }}",
                "  }"]
        if f > 0:
            body.append(f"  acc += f{rng.below(f)}(n / 2, p, v);")
        body += ["  return acc + (long)s;", "}"]
        parts.append("\n".join(body))
    parts.append("int main(void) { double v[128] = {0}; long t = 0;")
    for f in range(0, nfuncs, max(1, nfuncs // 50)):
        parts.append(f"  t += f{f}({10 + rng.below(100)}, 0, v);")
    parts.append('  printf("%ld\\n", t); return 0; }')
    return "\n\n".join(parts) + "\n"


def main():
    seed, outdir = int(sys.argv[1]), sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    rng = Xoshiro256pp(seed)
    words = vocabulary(rng, 20000)
    lines = text(rng, words, 4 << 20)
    with open(os.path.join(outdir, "text.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # A second version with about 1 line in 50 edited, for diff.
    edited = [(" ".join(zipf_word(rng, words) for _ in range(6)) if rng.below(50) == 0 else l) for l in lines]
    with open(os.path.join(outdir, "text2.txt"), "w") as f:
        f.write("\n".join(edited) + "\n")
    with open(os.path.join(outdir, "prog.c"), "w") as f:
        f.write(c_program(rng, 400))


if __name__ == "__main__":
    main()
