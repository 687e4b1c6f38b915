//! Pretty JSON, fast: the exact text of `serde_json::to_writer_pretty` (two
//! spaces, `"key": value`, `[]` and `{}` when empty), which is what the
//! original prints with `JSON.stringify(value, null, 2)` (SPEC §0).
//!
//! A newline and its indentation (and the comma before it) go out as one
//! slice of a static buffer, not one write per level. A long list is
//! written element by element while its rows are read ([`ArrayWriter`]),
//! through the printer's fixed buffer: the pieces join into exactly the
//! text of the whole list (`docs/perf.md#streaming-printer`).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// A newline, then indentation for up to 32 levels.
const NEWLINE_INDENT: &[u8; 65] =
    b"\n                                                                ";

/// serde_json's pretty layout with two-space indentation.
struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    fn newline<W: ?Sized + Write>(&self, w: &mut W, comma: bool) -> io::Result<()> {
        if comma {
            w.write_all(b",")?;
        }
        let width = self.depth * 2;
        if width < NEWLINE_INDENT.len() {
            w.write_all(&NEWLINE_INDENT[..=width])
        } else {
            w.write_all(b"\n")?;
            for _ in 0..self.depth {
                w.write_all(b"  ")?;
            }
            Ok(())
        }
    }
}

impl Formatter for Pretty {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.newline(w, false)?;
        }
        w.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.newline(w, !first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.newline(w, false)?;
        }
        w.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.newline(w, !first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Writes the pretty JSON of `value` to `out`.
pub(crate) fn write<W: Write, T: Serialize + ?Sized>(out: W, value: &T) -> io::Result<()> {
    write_at(out, value, 0)
}

/// Writes `value` as it appears `depth` levels deep.
fn write_at<W: Write, T: Serialize + ?Sized>(out: W, value: &T, depth: usize) -> io::Result<()> {
    let formatter = Pretty {
        depth,
        has_value: false,
    };
    let mut ser = serde_json::Serializer::with_formatter(out, formatter);
    value.serialize(&mut ser).map_err(io::Error::from)
}

/// Writes a JSON array one element at a time, exactly as
/// `serde_json::to_writer_pretty` writes the whole array: each element is
/// written at the depth it has inside the array. A long list is therefore
/// printed while its rows are still being read. Elements are serialized
/// into a reused buffer, which goes to `out` in chunks of about `chunk`
/// bytes, so that small writes are not virtual calls
/// (`docs/perf.md#streaming-printer`).
pub(crate) struct ArrayWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// The bytes gathered before they are written out.
    chunk: usize,
    empty: bool,
}

impl<W: Write> ArrayWriter<W> {
    /// An array written to `out` in chunks of about `chunk` bytes; nothing
    /// is written before the first chunk is full or
    /// [`ArrayWriter::finish`]. A writer that buffers passes its buffer's
    /// capacity, so each chunk goes past the buffer (`BufWriter` writes a
    /// slice at least its capacity straight through) instead of being
    /// copied into it first.
    pub(crate) fn new(out: W, chunk: usize) -> Self {
        ArrayWriter {
            out,
            buf: Vec::new(),
            chunk,
            empty: true,
        }
    }

    /// Adds the next element: `[` or `,`, a newline, the indentation and
    /// the element one level deep.
    pub(crate) fn push<T: Serialize + ?Sized>(&mut self, item: &T) -> io::Result<()> {
        if self.buf.capacity() == 0 {
            self.buf.reserve(self.chunk + self.chunk / 4);
        }
        self.buf
            .extend_from_slice(if self.empty { b"[\n  " } else { b",\n  " });
        self.empty = false;
        write_at(&mut self.buf, item, 1)?;
        if self.buf.len() >= self.chunk {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Closes the array (`[]` when it is empty), writes what is left and
    /// returns the writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.buf
            .extend_from_slice(if self.empty { b"[]" } else { b"\n]" });
        self.out.write_all(&self.buf)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ours<T: Serialize + ?Sized>(value: &T) -> String {
        let mut out = Vec::new();
        write(&mut out, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn matches_serde_json_pretty_on_every_shape() {
        let values = [
            json!(null),
            json!([]),
            json!({}),
            json!([[]]),
            json!([{}]),
            json!({"a": [], "b": {}, "c": [1, [2, [3, {"d": null}]]]}),
            json!({"quote\"key": "line\nbreak\u{1}", "uni": "é🙂", "n": -1.5e300}),
            json!([1, "two", true, false, null, {"x": {"y": {"z": [{}]}}}]),
        ];
        for v in &values {
            assert_eq!(ours(v), serde_json::to_string_pretty(v).unwrap(), "{v}");
        }
    }

    #[test]
    fn deep_nesting_past_the_indent_buffer_still_matches() {
        let mut v = json!("leaf");
        for i in 0..40 {
            v = if i % 2 == 0 {
                json!([v])
            } else {
                json!({"k": v})
            };
        }
        assert_eq!(ours(&v), serde_json::to_string_pretty(&v).unwrap());
    }

    #[test]
    fn a_list_written_element_by_element_is_the_whole_list() {
        for n in [0, 1, 2, 1000] {
            let items: Vec<serde_json::Value> = (0..n)
                .map(|i| json!({"id": i, "tags": (0..i % 3).collect::<Vec<_>>(), "o": {}, "e": []}))
                .collect();
            let mut list = ArrayWriter::new(Vec::new(), 64);
            for item in &items {
                list.push(item).unwrap();
            }
            let out = list.finish().unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string_pretty(&items).unwrap(),
                "{n} items"
            );
        }
    }
}
