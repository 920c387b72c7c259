//! VAS records in the text the registry writes them in, read without the TOML parser.
//!
//! Every process that reaches a VAS reads its record, and the TOML parser's first use
//! in a process costs more than the rest of reading it (its code is paged in and set
//! up for one small document). The registry writes records with `toml::to_string`,
//! whose output for a record is fixed; [`parse_canonical`] reads exactly that text and
//! nothing else: it builds the record from the lines and accepts it only if writing
//! the record gives back the same bytes, so whatever it accepts the TOML parser would
//! read as the same record. Anything else (hand-edited, hostile, another layout)
//! goes to the TOML parser and its checks.

use super::registry::{VasEntry, VasRecord};
use crate::api::Access;

/// The record as `toml::to_string` writes it (a test checks the two agree).
pub fn render(rec: &VasRecord) -> String {
    let mut s = format!(
        "format = \"{}\"\nid = {}\nname = \"{}\"\ntlb_tag = {}\n",
        rec.format, rec.id, rec.name, rec.tlb_tag
    );
    if rec.segments.is_empty() {
        s.push_str("segments = []\n");
    }
    for e in &rec.segments {
        let access = match e.access {
            Access::ReadOnly => "ro",
            Access::ReadWrite => "rw",
        };
        s.push_str(&format!(
            "\n[[segments]]\nsegment = \"{}\"\naccess = \"{access}\"\n",
            e.segment
        ));
    }
    s
}

/// A string value that needs no escape in a TOML basic string.
fn plain(v: &str) -> Option<&str> {
    v.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
        .then_some(v)
}

fn value<'a>(line: Option<&'a str>, key: &str) -> Option<&'a str> {
    line?.strip_prefix(key)?.strip_prefix(" = ")
}

fn string<'a>(line: Option<&'a str>, key: &str) -> Option<&'a str> {
    plain(value(line, key)?.strip_prefix('"')?.strip_suffix('"')?)
}

/// The record in `text` if `text` is exactly what the registry writes for it.
pub fn parse_canonical(text: &str) -> Option<VasRecord> {
    let mut lines = text.strip_suffix('\n')?.split('\n');
    let format = string(lines.next(), "format")?.to_string();
    let id = value(lines.next(), "id")?.parse::<i64>().ok()?;
    let name = string(lines.next(), "name")?.to_string();
    let tlb_tag = value(lines.next(), "tlb_tag")?.parse::<bool>().ok()?;
    let mut segments = Vec::new();
    while let Some(line) = lines.next() {
        if line == "segments = []" {
            continue;
        }
        if !line.is_empty() || lines.next()? != "[[segments]]" {
            return None;
        }
        let segment = string(lines.next(), "segment")?.to_string();
        let access = match string(lines.next(), "access")? {
            "ro" => Access::ReadOnly,
            "rw" => Access::ReadWrite,
            _ => return None,
        };
        segments.push(VasEntry { segment, access });
    }
    let rec = VasRecord {
        format,
        id: u64::try_from(id).ok()?,
        name,
        tlb_tag,
        segments,
    };
    (render(&rec) == text).then_some(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = VasRecord> {
        let name = "[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}";
        (
            prop_oneof![Just("pmlab-vas 1".to_string()), "[ -~]{0,12}"],
            0..=i64::MAX as u64,
            name,
            any::<bool>(),
            proptest::collection::vec((name, any::<bool>()), 0..4),
        )
            .prop_map(|(format, id, name, tlb_tag, segs)| VasRecord {
                format,
                id,
                name,
                tlb_tag,
                segments: segs
                    .into_iter()
                    .map(|(segment, rw)| VasEntry {
                        segment,
                        access: if rw {
                            Access::ReadWrite
                        } else {
                            Access::ReadOnly
                        },
                    })
                    .collect(),
            })
    }

    proptest! {
        /// The text written for any record is the one the TOML writer writes, and
        /// reads back as the record (strings TOML would escape are not read here).
        #[test]
        fn render_is_the_toml_writers_text(rec in record()) {
            let toml_text = toml::to_string(&rec).unwrap();
            if plain(&rec.format).is_some() {
                prop_assert_eq!(&render(&rec), &toml_text);
                prop_assert_eq!(parse_canonical(&toml_text), Some(rec));
            } else {
                prop_assert_eq!(parse_canonical(&toml_text), None);
            }
        }

        /// Whatever the fast reader accepts, the TOML parser reads as the same record:
        /// records written, then damaged (a byte changed, cut, or a line added).
        #[test]
        fn what_it_accepts_toml_reads_the_same(
            rec in record(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            how in 0..3u8,
        ) {
            let mut b = toml::to_string(&rec).unwrap().into_bytes();
            let i = at.index(b.len());
            match how {
                0 => b[i] = byte,
                1 => b.truncate(i),
                _ => b.splice(i..i, b"x = 1\n".iter().copied()).for_each(drop),
            }
            let Ok(text) = String::from_utf8(b) else { return Ok(()) };
            if let Some(r) = parse_canonical(&text) {
                prop_assert_eq!(toml::from_str::<VasRecord>(&text).ok(), Some(r));
            }
        }
    }

    #[test]
    fn other_layouts_go_to_the_toml_parser() {
        let canonical = "format = \"pmlab-vas 1\"\nid = 3\nname = \"d\"\ntlb_tag = false\n\n[[segments]]\nsegment = \"d\"\naccess = \"rw\"\n";
        assert!(parse_canonical(canonical).is_some());
        for other in [
            canonical.replace("id = 3", "id = 0x3"),
            canonical.replace("id = 3", "id = +3"),
            canonical.replace("\"d\"\ntlb", "'d'\ntlb"),
            canonical.replace("tlb_tag = false\n", "tlb_tag = false\nextra = 1\n"),
            canonical.replace("access = \"rw\"", "access = \"wx\""),
            canonical.trim_end().to_string(),
            format!("# comment\n{canonical}"),
        ] {
            assert_eq!(parse_canonical(&other), None, "{other:?}");
        }
    }
}
