//! `working-tree-encoding` (gitattributes): a file kept in the work tree in another encoding
//! (UTF-16 for PowerShell and Windows resources, Shift-JIS for old sources) is stored in git as
//! UTF-8, as `git add` stores it, and written back in its own encoding.
//!
//! Decisions a reader must know:
//! - Decoding is strict: a file that is not valid in the encoding its attributes name is never
//!   stored raw (git refuses to add it too); the commit leaves it out and names why. git's own
//!   BOM rules hold: `UTF-16`/`UTF-32` need a byte order mark, `UTF-16LE`/`UTF-16BE` (and the
//!   32-bit ones) must not have one, and the `-BOM` names of git (`UTF-16LE-BOM`) need one.
//! - After decoding, line endings are normalised as for any text file: CRLF becomes LF when the
//!   file is text for git (`text`, `eol`, or `text=auto`/`core.autocrlf` on a file with no NUL).
//! - UTF-16 and UTF-32 are done here (encoding_rs has no UTF-32 and writes no UTF-16); every
//!   other encoding through encoding_rs, by the label git passes to iconv.

use std::path::Path;

use git2::{AttrCheckFlags, AttrValue, Config};

use super::Repository;

/// How a file is converted between the work tree and git: its encoding, and whether its line
/// endings are normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Encoded {
    /// The `working-tree-encoding` as written (`UTF-16LE-BOM`).
    pub encoding: String,
    /// CRLF in the work tree, LF in git (`eol=crlf`, or text with `core.autocrlf=true`).
    pub crlf_in_tree: bool,
    /// Text for git: CRLF is stored as LF.
    pub text: bool,
}

impl Repository {
    /// The conversion `.gitattributes` asks for `rel`, when it names a `working-tree-encoding`
    /// other than UTF-8.
    pub(crate) fn encoded(&self, config: &Config, rel: &Path) -> Option<Encoded> {
        let attr = |name: &str| {
            self.repo
                .get_attr_bytes(rel, name, AttrCheckFlags::FILE_THEN_INDEX)
                .ok()
                .map(AttrValue::from_bytes)
        };
        let encoding = match attr("working-tree-encoding")? {
            AttrValue::String(s) => s.to_string(),
            AttrValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            _ => return None,
        };
        if encoding.eq_ignore_ascii_case("utf-8") || encoding.eq_ignore_ascii_case("utf8") {
            return None;
        }
        let autocrlf = config
            .get_string("core.autocrlf")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let eol = match attr("eol") {
            Some(AttrValue::String(s)) => Some(s.to_ascii_lowercase()),
            _ => None,
        };
        let text = match attr("text") {
            Some(AttrValue::True | AttrValue::String(_)) => true,
            Some(AttrValue::False) => false,
            _ => eol.is_some() || autocrlf == "true" || autocrlf == "input",
        };
        let crlf_in_tree =
            text && (eol.as_deref() == Some("crlf") || (eol.is_none() && autocrlf == "true"));
        Some(Encoded {
            encoding,
            crlf_in_tree,
            text,
        })
    }
}

impl Encoded {
    /// The work tree's `bytes` as git stores them (UTF-8, LF when text), or why they cannot be.
    pub(crate) fn to_git(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        let text = decode(&self.encoding, bytes)?;
        let text = if self.text && !text.contains('\0') {
            text.replace("\r\n", "\n")
        } else {
            text
        };
        Ok(text.into_bytes())
    }

    /// A blob's UTF-8 `bytes` as the work tree keeps them; `None` when they are not UTF-8 or
    /// the encoding cannot write them (then the blob is written as it is).
    pub(crate) fn to_work_tree(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let text = std::str::from_utf8(bytes).ok()?;
        let text = if self.crlf_in_tree {
            text.replace("\r\n", "\n").replace('\n', "\r\n")
        } else {
            text.to_string()
        };
        encode(&self.encoding, &text)
    }
}

/// The byte order of a UTF-16 or UTF-32 encoding name, and whether it needs, forbids or lets
/// the byte order mark decide: `(width, little endian, bom rule)`.
fn unicode_form(name: &str) -> Option<(usize, Option<bool>, Bom)> {
    let name = name.to_ascii_uppercase().replace('_', "-");
    let (width, rest) = if let Some(rest) = name.strip_prefix("UTF-16") {
        (2, rest)
    } else if let Some(rest) = name.strip_prefix("UTF-32") {
        (4, rest)
    } else {
        return None;
    };
    Some(match rest {
        "" => (width, None, Bom::Required),
        "LE" => (width, Some(true), Bom::Prohibited),
        "BE" => (width, Some(false), Bom::Prohibited),
        "LE-BOM" => (width, Some(true), Bom::Required),
        "BE-BOM" => (width, Some(false), Bom::Required),
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bom {
    Required,
    Prohibited,
}

/// `bytes` in `encoding` as text, strictly.
fn decode(encoding: &str, bytes: &[u8]) -> Result<String, String> {
    if let Some((width, little, bom)) = unicode_form(encoding) {
        let marks: [(&[u8], bool); 2] = if width == 2 {
            [(&[0xFF, 0xFE], true), (&[0xFE, 0xFF], false)]
        } else {
            [(&[0xFF, 0xFE, 0, 0], true), (&[0, 0, 0xFE, 0xFF], false)]
        };
        let found = marks.iter().find(|(m, _)| bytes.starts_with(m));
        let (body, little) = match (bom, found, little) {
            (Bom::Prohibited, Some(_), _) => {
                return Err(format!("a byte order mark, which {encoding} forbids"));
            }
            (Bom::Required, None, _) => {
                return Err(format!("no byte order mark, which {encoding} needs"));
            }
            (Bom::Required, Some((_, le)), Some(want)) if *le != want => {
                return Err(format!(
                    "a byte order mark of the other byte order than {encoding}"
                ));
            }
            (Bom::Required, Some((m, le)), _) => (&bytes[m.len()..], *le),
            (Bom::Prohibited, None, Some(le)) => (bytes, le),
            (Bom::Prohibited, None, None) => (bytes, true),
        };
        if body.len() % width != 0 {
            return Err(format!(
                "{} bytes, not whole {encoding} characters",
                body.len()
            ));
        }
        return if width == 2 {
            let units: Vec<u16> = body
                .chunks_exact(2)
                .map(|c| {
                    if little {
                        u16::from_le_bytes([c[0], c[1]])
                    } else {
                        u16::from_be_bytes([c[0], c[1]])
                    }
                })
                .collect();
            String::from_utf16(&units).map_err(|_| format!("text that is not valid {encoding}"))
        } else {
            body.chunks_exact(4)
                .map(|c| {
                    let v = if little {
                        u32::from_le_bytes([c[0], c[1], c[2], c[3]])
                    } else {
                        u32::from_be_bytes([c[0], c[1], c[2], c[3]])
                    };
                    char::from_u32(v)
                })
                .collect::<Option<String>>()
                .ok_or_else(|| format!("text that is not valid {encoding}"))
        };
    }
    let enc = encoding_rs::Encoding::for_label(encoding.as_bytes())
        .ok_or_else(|| format!("an encoding kern does not know ({encoding})"))?;
    enc.decode_without_bom_handling_and_without_replacement(bytes)
        .map(std::borrow::Cow::into_owned)
        .ok_or_else(|| format!("text that is not valid {encoding}"))
}

/// `text` in `encoding`; `None` when it cannot be written there.
fn encode(encoding: &str, text: &str) -> Option<Vec<u8>> {
    if let Some((width, little, bom)) = unicode_form(encoding) {
        let little = little.unwrap_or(true);
        let mut out = Vec::with_capacity(text.len() * width + 4);
        if bom == Bom::Required {
            let mark: &[u8] = match (width, little) {
                (2, true) => &[0xFF, 0xFE],
                (2, false) => &[0xFE, 0xFF],
                (_, true) => &[0xFF, 0xFE, 0, 0],
                (_, false) => &[0, 0, 0xFE, 0xFF],
            };
            out.extend_from_slice(mark);
        }
        if width == 2 {
            for unit in text.encode_utf16() {
                out.extend_from_slice(&if little {
                    unit.to_le_bytes()
                } else {
                    unit.to_be_bytes()
                });
            }
        } else {
            for c in text.chars() {
                let v = c as u32;
                out.extend_from_slice(&if little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                });
            }
        }
        return Some(out);
    }
    let enc = encoding_rs::Encoding::for_label(encoding.as_bytes())?;
    let (bytes, _, unmappable) = enc.encode(text);
    (!unmappable).then(|| bytes.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16le_bom(text: &str) -> Vec<u8> {
        let mut out = vec![0xFF, 0xFE];
        for u in text.encode_utf16() {
            out.extend_from_slice(&u.to_le_bytes());
        }
        out
    }

    #[test]
    fn decoding_is_strict_and_follows_gits_bom_rules() {
        let ps1 = utf16le_bom("Write-Host hi\r\n");
        let cases: Vec<(&str, Vec<u8>, Result<&str, &str>)> = vec![
            ("UTF-16LE-BOM", ps1.clone(), Ok("Write-Host hi\r\n")),
            ("UTF-16", ps1.clone(), Ok("Write-Host hi\r\n")),
            (
                "UTF-16LE",
                ps1.clone(),
                Err("a byte order mark, which UTF-16LE forbids"),
            ),
            ("UTF-16LE", ps1[2..].to_vec(), Ok("Write-Host hi\r\n")),
            (
                "UTF-16",
                ps1[2..].to_vec(),
                Err("no byte order mark, which UTF-16 needs"),
            ),
            (
                "UTF-16LE-BOM",
                ps1[..ps1.len() - 1].to_vec(),
                Err("29 bytes, not whole UTF-16LE-BOM characters"),
            ),
            (
                "UTF-16LE",
                vec![0x00, 0xD8],
                Err("text that is not valid UTF-16LE"),
            ),
            ("SHIFT-JIS", vec![0x82, 0xA0], Ok("\u{3042}")),
            ("ISO-8859-1", vec![0xE9], Ok("\u{e9}")),
            ("UTF-32LE", vec![0x41, 0, 0, 0], Ok("A")),
            (
                "NOT-AN-ENCODING",
                vec![0x41],
                Err("an encoding kern does not know (NOT-AN-ENCODING)"),
            ),
        ];
        for (encoding, bytes, expected) in cases {
            assert_eq!(
                decode(encoding, &bytes).as_deref(),
                expected.map_err(str::to_string).as_deref(),
                "{encoding}"
            );
        }
    }

    #[test]
    fn a_file_goes_to_git_as_utf8_with_lf_and_comes_back_byte_for_byte() {
        let conversion = Encoded {
            encoding: "UTF-16LE-BOM".into(),
            crlf_in_tree: true,
            text: true,
        };
        let tree = utf16le_bom("a\r\nb\r\n");
        let git = conversion.to_git(&tree).unwrap();
        assert_eq!(git, b"a\nb\n");
        assert_eq!(conversion.to_work_tree(&git).unwrap(), tree);
        let sjis = Encoded {
            encoding: "Shift_JIS".into(),
            crlf_in_tree: false,
            text: false,
        };
        assert_eq!(
            sjis.to_work_tree("\u{3042}".as_bytes()).unwrap(),
            vec![0x82, 0xA0]
        );
    }
}
