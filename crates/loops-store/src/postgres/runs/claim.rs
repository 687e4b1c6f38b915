//! The PostgreSQL side of the claims (`ClaimTx`): the transaction the
//! claims of one call share.
//!
//! It first locks the requested loops' rows (in id order, so two daemons
//! claiming overlapping sets of loops never deadlock): every claimer of
//! one loop then decides in turn, from the state the previous one
//! committed. A scheduled claim skips the loops another transaction holds
//! (`SKIP LOCKED`): another daemon is deciding them right now, so this one
//! moves on to other loops instead of waiting to find their slots taken,
//! which is what lets several daemons drain many due loops side by side.
//! A manual claim waits. Then it locks the pools of the loops it locked,
//! in name order, so the claims of one pool count its runs in turn.
//!
//! Every claim writes a claim token generated before the transaction,
//! which fences the heartbeats and finalizes of this claim and recognizes
//! it when the COMMIT's outcome was lost (`outcome.rs`).

use std::collections::{BTreeSet, HashSet};

use crate::backend::{ClaimSteps, ClaimTx};
use crate::error::{Result, StoreError};
use crate::postgres::{Conn, Postgres};
use crate::runs::{Claim, NotClaimed};

/// The ids `sql` returns for the loop ids of `claims` (its `$1`), and the
/// pools named in its second column, if it has one.
fn loop_ids(
    c: &mut Conn<'_>,
    sql: &str,
    claims: &dyn ClaimSteps,
    context: &'static str,
) -> Result<(HashSet<String>, BTreeSet<String>)> {
    let ids: Vec<&str> = claims
        .requests()
        .iter()
        .map(|(lp, _)| lp.id.as_str())
        .collect();
    let mut found = (HashSet::new(), BTreeSet::new());
    for row in c.query(sql, &[&ids], context)? {
        found.0.insert(
            row.try_get::<_, String>(0)
                .map_err(StoreError::db(context))?,
        );
        if row.len() > 1
            && let Some(pool) = row
                .try_get::<_, Option<String>>(1)
                .map_err(StoreError::db(context))?
        {
            found.1.insert(pool);
        }
    }
    Ok(found)
}

/// Locks the rows of `pools` in name order, so that every claimer of a
/// pool counts its running runs in turn (issue 30, Q3) and two claims
/// locking several pools never deadlock. The loops they belong to are
/// locked already, so their pools cannot change meanwhile.
fn lock_pools(c: &mut Conn<'_>, pools: &BTreeSet<String>) -> Result<()> {
    if pools.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = pools.iter().map(String::as_str).collect();
    c.query(
        "SELECT name FROM pools WHERE name = ANY($1) ORDER BY name FOR UPDATE",
        &[&names],
        "locking the pools to claim in",
    )?;
    Ok(())
}

impl ClaimTx for Postgres {
    fn claim_tx(&self, claims: &dyn ClaimSteps) -> Result<Vec<Claim>> {
        let lock = if claims.manual() {
            "SELECT id, pool FROM loops WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE"
        } else {
            "SELECT id, pool FROM loops WHERE id = ANY($1) ORDER BY id
             FOR NO KEY UPDATE SKIP LOCKED"
        };
        let requests = claims.requests();
        self.resolving(
            || {
                self.write_tx(|c| {
                    let (locked, pools) = loop_ids(c, lock, claims, "locking the loops to claim")?;
                    lock_pools(c, &pools)?;
                    // What a scheduled claim did not lock is either deleted
                    // or being claimed.
                    let exist = if locked.len() < requests.len() {
                        let exist = "SELECT id FROM loops WHERE id = ANY($1)";
                        loop_ids(c, exist, claims, "reading which loops exist")?.0
                    } else {
                        locked.clone()
                    };
                    let mut out = Vec::with_capacity(requests.len());
                    for (i, (lp, _)) in requests.iter().enumerate() {
                        out.push(if !exist.contains(lp.id.as_str()) {
                            Claim::NotClaimed(NotClaimed::LoopMissing)
                        } else if !locked.contains(lp.id.as_str()) {
                            // Another daemon is claiming it right now.
                            Claim::NotClaimed(NotClaimed::Raced)
                        } else {
                            claims.claim(c, i)?
                        });
                    }
                    Ok(out)
                })
            },
            |c| claims.landed(c).map(Some),
        )
    }
}
