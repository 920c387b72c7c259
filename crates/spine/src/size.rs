//! Sizes as people write them (regions, caches, pools, pages): `65536`, `64K`, `64M`, `1G`, `64MiB`.

/// Parses a byte count with an optional binary suffix (`K`, `M`, `G`, `T`, optionally
/// followed by `iB` or `B`; case-insensitive). Returns a message naming the problem.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits == 0 {
        return Err(format!("size {text:?} does not start with a number"));
    }
    let n: u64 = t[..digits]
        .parse()
        .map_err(|_| format!("size {text:?} is too large"))?;
    let shift = match t[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "size {text:?} has unknown unit {other:?} (use K, M, G or T)"
            ));
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("M").is_err());
        assert!(parse_size("12Q").unwrap_err().contains("unknown unit"));
        assert!(parse_size("99999999999T").is_err());
    }
}
