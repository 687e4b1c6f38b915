//! [`PoolOps`] written once for both backends.

use loops_core::Timestamp;

use crate::backend::PoolOps;
use crate::columns::{instant, int, text};
use crate::error::Result;
use crate::pools::{PoolInfo, PoolRemoval};
use crate::sql::{Col, Db, Fields};

/// The columns [`pool_row`] reads, in order.
const POOL_COLUMNS: &[&str] = &[
    "name",
    "max_running",
    "members",
    "running",
    "created_at",
    "updated_at",
];

/// Every pool with its members and running runs, by name.
const LIST: &str = "SELECT p.name, p.max_running,
       (SELECT COUNT(*) FROM loops l WHERE l.pool = p.name),
       (SELECT COUNT(*) FROM loop_runs r WHERE r.pool = p.name AND r.status = 'running'),
       p.created_at, p.updated_at
     FROM pools p ORDER BY p.name";

/// Creates a pool or changes its limit.
const UPSERT: &str = "INSERT INTO pools (name, max_running, created_at, updated_at)
     VALUES (?1, ?2, ?3, ?3)
     ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
       updated_at = excluded.updated_at";

fn pool_row(row: &dyn Fields) -> Col<PoolInfo> {
    let n = POOL_COLUMNS;
    Ok(PoolInfo {
        name: text(row, n, 0)?,
        max_running: int(row, n, 1)?,
        members: int(row, n, 2)?,
        running: int(row, n, 3)?,
        created_at: instant(row, n, 4)?,
        updated_at: instant(row, n, 5)?,
    })
}

impl<D: Db> PoolOps for D {
    fn set_pool(&self, name: &str, max_running: u32, now: Timestamp) -> Result<PoolInfo> {
        self.write(|c| {
            c.execute(
                UPSERT,
                &[name.into(), max_running.into(), now.into()],
                "setting a pool",
            )?;
            // A raised limit may let waiting members start.
            c.notify("pool")?;
            let all = c.query_vec(LIST, &[], ("pools", "listing the pools"), pool_row)?;
            Ok(all
                .into_iter()
                .find(|p| p.name == name)
                .expect("the pool was just written"))
        })
    }

    fn list_pools(&self) -> Result<Vec<PoolInfo>> {
        self.read(|c| c.query_vec(LIST, &[], ("pools", "listing the pools"), pool_row))
    }

    fn remove_pool(&self, name: &str) -> Result<PoolRemoval> {
        self.write(|c| {
            let members = c.query_vec(
                "SELECT name FROM loops WHERE pool = ?1 ORDER BY name LIMIT 10",
                &[name.into()],
                ("loops", "listing a pool's members"),
                |row| text(row, &["name"], 0),
            )?;
            if !members.is_empty() {
                return Ok(PoolRemoval::InUse(members));
            }
            let removed = c.execute(
                "DELETE FROM pools WHERE name = ?1",
                &[name.into()],
                "removing a pool",
            )?;
            Ok(if removed == 0 {
                PoolRemoval::Missing
            } else {
                PoolRemoval::Removed
            })
        })
    }
}
