//! Pretty JSON, fast: the exact text of `serde_json::to_writer_pretty` (two
//! spaces, `"key": value`, `[]` and `{}` when empty), which is what the
//! original prints with `JSON.stringify(value, null, 2)` (SPEC §0).
//!
//! A newline and its indentation (and the comma before it) go out as one
//! slice of a static buffer, not one write per level. A long list is also
//! serialized on a second thread while the first one is still reading
//! rows (see [`ListWriter`]): each element is written at the depth it has
//! inside the array, so the pieces join into exactly the text of the whole
//! list. (A hand-written serializer was tried and was no faster than
//! serde_json with this formatter.)

use std::io::{self, Write};
use std::sync::mpsc;
use std::thread::{Scope, ScopedJoinHandle};

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

/// Elements handed to the writer thread at once.
const BATCH: usize = 64;

/// The writer thread of a [`ListWriter`] and its queue.
struct Writer<'scope, T> {
    queue: mpsc::SyncSender<Vec<T>>,
    handle: ScopedJoinHandle<'scope, io::Result<Vec<u8>>>,
}

/// Writes a JSON array element by element while the caller produces the
/// elements: `push` them, then `finish` for the text. A short list is
/// written by the caller in `finish`; once a list passes [`BATCH`]
/// elements, a thread of the scope starts writing them while the caller
/// produces the rest (a thread costs more than it saves on a short list).
pub(crate) struct ListWriter<'scope, 'env, T> {
    scope: &'scope Scope<'scope, 'env>,
    batch: Vec<T>,
    /// The writer thread and its queue, once the list is long.
    thread: Option<Writer<'scope, T>>,
}

impl<'scope, 'env, T: Serialize + Send + 'scope> ListWriter<'scope, 'env, T> {
    /// A writer that may start a thread of `scope`.
    pub(crate) fn new(scope: &'scope Scope<'scope, 'env>) -> Self {
        ListWriter {
            scope,
            batch: Vec::with_capacity(BATCH),
            thread: None,
        }
    }

    fn start_thread(&self) -> Writer<'scope, T> {
        let (tx, rx) = mpsc::sync_channel::<Vec<T>>(64);
        let handle = self.scope.spawn(move || {
            let mut out = Vec::with_capacity(64 * 1024);
            let mut first = true;
            for batch in rx {
                for item in &batch {
                    element(&mut out, item, first)?;
                    first = false;
                }
            }
            close(&mut out, first);
            Ok(out)
        });
        Writer { queue: tx, handle }
    }

    /// Adds the next element.
    pub(crate) fn push(&mut self, item: T) {
        self.batch.push(item);
        if self.batch.len() < BATCH {
            return;
        }
        let writer = match self.thread.take() {
            Some(writer) => writer,
            None => self.start_thread(),
        };
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        // A failed send means the writer stopped on an error, which
        // `finish` reports.
        let _ = writer.queue.send(batch);
        self.thread = Some(writer);
    }

    /// The text of the whole array.
    pub(crate) fn finish(self) -> io::Result<Vec<u8>> {
        let Some(Writer { queue, handle }) = self.thread else {
            let mut out = Vec::with_capacity(self.batch.len() * 640 + 2);
            write(&mut out, &self.batch)?;
            return Ok(out);
        };
        if !self.batch.is_empty() {
            let _ = queue.send(self.batch);
        }
        drop(queue);
        handle
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("serializing the list panicked")))
    }
}

/// Writes an array element as serde_json places it: `[` or `,` first, then
/// a newline, the indentation and the element one level deep.
fn element<T: Serialize>(out: &mut Vec<u8>, item: &T, first: bool) -> io::Result<()> {
    out.extend_from_slice(if first { b"[\n  " } else { b",\n  " });
    write_at(&mut *out, item, 1)
}

/// Closes an array written by [`element`]: `[]` when it is empty.
fn close(out: &mut Vec<u8>, empty: bool) {
    out.extend_from_slice(if empty { b"[]" } else { b"\n]" });
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
        for n in [0, 1, 2, 63, 64, 65, 1000] {
            let items: Vec<serde_json::Value> = (0..n)
                .map(|i| json!({"id": i, "tags": (0..i % 3).collect::<Vec<_>>(), "o": {}, "e": []}))
                .collect();
            let out = std::thread::scope(|s| {
                let mut list = ListWriter::new(s);
                for item in items.iter().cloned() {
                    list.push(item);
                }
                list.finish().unwrap()
            });
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string_pretty(&items).unwrap(),
                "{n} items"
            );
        }
    }
}
