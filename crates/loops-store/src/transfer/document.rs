//! The export document on the wire: [`Writer`] writes it a row at a time,
//! and [`read`] parses it a record at a time, handing each to a [`Sink`],
//! so neither side holds a whole table in memory.
//!
//! The header must come before the tables, and a table after the tables
//! its rows point to (pools, workflows and loops, then runs, then triggers
//! and workflow runs, then steps and events): `loops export` writes it
//! so, and an
//! import can then check the header before it writes anything and write
//! parents first. Unknown keys are skipped, so a later version of format 1
//! may add some; a missing table is an empty one, so a document written
//! before `pools` and `triggers` still reads.

use std::io::{BufReader, Read, Write};

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{
    EXPORT_FORMAT, EXPORT_FORMAT_VERSION, ExportSummary, ExportedRun, ExportedStepRun, Record,
    Table, TransferError,
};
use crate::schema::SCHEMA_VERSION;

/// Writes an export document: the header at [`Writer::start`], each row
/// with [`Writer::record`] (tables in [`Table::ALL`] order), the rest at
/// [`Writer::finish`]. One record per line, so a large document still
/// reads and diffs line by line.
pub(super) struct Writer<'a> {
    out: &'a mut dyn Write,
    exported_at: loops_core::Timestamp,
    history: bool,
    /// The position in [`Table::ALL`] of the next array to open.
    next: usize,
    /// Rows written into the open array.
    in_array: u64,
    counts: [u64; Table::COUNT],
    running: u64,
}

impl<'a> Writer<'a> {
    /// Writes the header.
    pub(super) fn start(
        out: &'a mut dyn Write,
        exported_at: loops_core::Timestamp,
        history: bool,
    ) -> Result<Writer<'a>, TransferError> {
        write!(
            out,
            "{{\n  \"format\": \"{EXPORT_FORMAT}\",\n  \"formatVersion\": {EXPORT_FORMAT_VERSION},\
             \n  \"schemaVersion\": {SCHEMA_VERSION},\n  \"exportedAt\": \"{exported_at}\",\
             \n  \"history\": {history}"
        )
        .map_err(TransferError::Write)?;
        Ok(Writer {
            out,
            exported_at,
            history,
            next: 0,
            in_array: 0,
            counts: [0; Table::COUNT],
            running: 0,
        })
    }

    /// Writes one row, opening its table's array (and any empty ones
    /// before it) first.
    pub(super) fn record(&mut self, record: &Record) -> Result<(), TransferError> {
        let table = record.table();
        debug_assert!(
            table.index() + 1 >= self.next,
            "rows come table by table in Table::ALL order"
        );
        self.open_through(table).map_err(TransferError::Write)?;
        let sep: &[u8] = if self.in_array == 0 {
            b"\n    "
        } else {
            b",\n    "
        };
        self.out.write_all(sep).map_err(TransferError::Write)?;
        record
            .write_json(self.out)
            .map_err(|e| TransferError::Write(e.into()))?;
        self.in_array += 1;
        self.counts[table.index()] += 1;
        if record.is_running() {
            self.running += 1;
        }
        Ok(())
    }

    /// Writes the arrays left, empty, and closes the document.
    pub(super) fn finish(mut self) -> Result<ExportSummary, TransferError> {
        self.open_through(Table::ALL[Table::COUNT - 1])
            .and_then(|()| self.close_open())
            .and_then(|()| self.out.write_all(b"\n}\n"))
            .and_then(|()| self.out.flush())
            .map_err(TransferError::Write)?;
        Ok(ExportSummary {
            exported_at: self.exported_at,
            history: self.history,
            counts: Table::ALL
                .iter()
                .map(|t| (*t, self.counts[t.index()]))
                .collect(),
            running: self.running,
        })
    }

    /// Opens every array up to `table`'s, closing the one open before.
    fn open_through(&mut self, table: Table) -> std::io::Result<()> {
        while self.next <= table.index() {
            self.close_open()?;
            write!(self.out, ",\n  \"{}\": [", Table::ALL[self.next].key())?;
            self.next += 1;
            self.in_array = 0;
        }
        Ok(())
    }

    fn close_open(&mut self) -> std::io::Result<()> {
        if self.next == 0 {
            return Ok(());
        }
        let close: &[u8] = if self.in_array == 0 { b"]" } else { b"\n  ]" };
        self.out.write_all(close)
    }
}

/// What a document says about itself.
#[derive(Debug, Default)]
pub(super) struct Header {
    pub(super) format: Option<String>,
    pub(super) format_version: Option<u64>,
    pub(super) schema_version: Option<i64>,
    pub(super) exported_at: Option<String>,
    pub(super) history: Option<bool>,
}

impl Header {
    /// Refuses a document that is not an export this binary can read.
    fn check(&self) -> Result<(), TransferError> {
        if self.format.as_deref() != Some(EXPORT_FORMAT) {
            return Err(TransferError::Format {
                found: self
                    .format
                    .as_ref()
                    .map_or_else(|| "missing".to_owned(), |f| format!("{f:?}")),
            });
        }
        let version = self.format_version.ok_or_else(|| {
            TransferError::Malformed("it has no \"formatVersion\" before its tables".into())
        })?;
        if version > u64::from(EXPORT_FORMAT_VERSION) {
            return Err(TransferError::NewerFormat {
                found: version,
                supported: EXPORT_FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(TransferError::Malformed(
                "its \"formatVersion\" is 0, which no loops writes".into(),
            ));
        }
        let schema = self.schema_version.ok_or_else(|| {
            TransferError::Malformed("it has no \"schemaVersion\" before its tables".into())
        })?;
        if schema > SCHEMA_VERSION {
            return Err(TransferError::NewerSchema {
                found: schema,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(())
    }
}

/// Where [`read`] hands what it parses.
pub(super) trait Sink {
    /// The header, checked, before the first record.
    fn header(&mut self, header: &Header) -> Result<(), TransferError>;
    /// One record, in document order.
    fn record(&mut self, record: Record) -> Result<(), TransferError>;
    /// The end of a table's array.
    fn end_table(&mut self, table: Table) -> Result<(), TransferError>;
}

/// Parses a document from `input`, checking its header before the first
/// table and handing every record to `sink`. A sink's error stops the
/// parse and is returned as it is.
pub(super) fn read(input: &mut dyn Read, sink: &mut dyn Sink) -> Result<Header, TransferError> {
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 16, input));
    let mut parse = Parse {
        sink,
        header: Header::default(),
        checked: false,
        seen: [false; Table::COUNT],
        rank: 0,
        at: None,
        failed: None,
    };
    let out = (&mut parse).deserialize(&mut de).and_then(|()| de.end());
    if let Some(e) = parse.failed.take() {
        return Err(e);
    }
    if let Err(e) = out {
        if e.is_io() {
            return Err(TransferError::Read(e.into()));
        }
        return Err(TransferError::Malformed(match parse.at {
            Some((table, index)) => format!("{} record {index}: {e}", table.name()),
            None => e.to_string(),
        }));
    }
    if !parse.checked {
        parse.header.check()?;
    }
    Ok(parse.header)
}

/// The parse's state, shared by the visitors.
struct Parse<'s> {
    sink: &'s mut dyn Sink,
    header: Header,
    /// The header was checked (at the first table).
    checked: bool,
    /// The tables seen, by position in [`Table::ALL`].
    seen: [bool; Table::COUNT],
    /// The highest [`Table::rank`] seen.
    rank: u8,
    /// The record being parsed, for error messages.
    at: Option<(Table, u64)>,
    /// The error that stopped the parse, when it was not a parse error.
    failed: Option<TransferError>,
}

impl Parse<'_> {
    /// Keeps `e` and returns the error that unwinds the parser.
    fn fail<E: de::Error>(&mut self, e: TransferError) -> E {
        self.failed = Some(e);
        E::custom("the import stopped")
    }

    /// Checks the header (once) and the table's place in the document.
    fn begin_table(&mut self, table: Table) -> Result<(), TransferError> {
        if !self.checked {
            self.header.check()?;
            self.checked = true;
            self.sink.header(&self.header)?;
        }
        if std::mem::replace(&mut self.seen[table.index()], true) {
            return Err(TransferError::Malformed(format!(
                "it lists \"{}\" twice",
                table.key()
            )));
        }
        if table.rank() < self.rank {
            return Err(TransferError::Malformed(format!(
                "it lists \"{}\" after rows that point to them; an import writes pools, \
                 workflows and loops, then runs, then triggers and workflow runs, then step \
                 runs and events, so the document must list them in that order (as `loops \
                 export` does)",
                table.key()
            )));
        }
        self.rank = table.rank();
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &mut Parse<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut Parse<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a loops export document (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => self.header.format = Some(map.next_value()?),
                "formatVersion" => self.header.format_version = Some(map.next_value()?),
                "schemaVersion" => self.header.schema_version = Some(map.next_value()?),
                "exportedAt" => self.header.exported_at = Some(map.next_value()?),
                "history" => self.header.history = Some(map.next_value()?),
                other => match Table::from_key(other) {
                    Some(table) => {
                        if let Err(e) = self.begin_table(table) {
                            return Err(self.fail(e));
                        }
                        map.next_value_seed(Rows {
                            parse: &mut *self,
                            table,
                        })?;
                        self.at = None;
                        if let Err(e) = self.sink.end_table(table) {
                            return Err(self.fail(e));
                        }
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
            }
        }
        Ok(())
    }
}

/// One table's array.
struct Rows<'p, 's> {
    parse: &'p mut Parse<'s>,
    table: Table,
}

impl<'de> DeserializeSeed<'de> for Rows<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Rows<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an array of {}", self.table.name())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            index += 1;
            self.parse.at = Some((self.table, index));
            let record = match self.table {
                Table::Pools => next(&mut seq, Record::Pool)?,
                Table::Triggers => next(&mut seq, Record::Trigger)?,
                Table::Workflows => next(&mut seq, Record::Workflow)?,
                Table::Loops => next(&mut seq, Record::Loop)?,
                Table::Runs => next::<_, ExportedRun>(&mut seq, Record::Run)?,
                Table::WorkflowRuns => next(&mut seq, Record::WorkflowRun)?,
                Table::StepRuns => next::<_, ExportedStepRun>(&mut seq, Record::StepRun)?,
                Table::Events => next(&mut seq, Record::Event)?,
            };
            let Some(record) = record else {
                return Ok(());
            };
            if let Err(e) = self.parse.sink.record(record) {
                return Err(self.parse.fail(e));
            }
        }
    }
}

/// The next element of an array of `T`s, as a [`Record`].
fn next<'de, A: SeqAccess<'de>, T: de::Deserialize<'de>>(
    seq: &mut A,
    wrap: fn(Box<T>) -> Record,
) -> Result<Option<Record>, A::Error> {
    Ok(seq.next_element::<T>()?.map(|v| wrap(Box::new(v))))
}
