//! The SQLite side of the claims (`ClaimTx`): the claims of one call share
//! one `BEGIN IMMEDIATE` transaction, so two runners (threads or
//! processes) racing for one slot serialize on the write lock.

use crate::backend::{ClaimSteps, ClaimTx};
use crate::error::Result;
use crate::runs::Claim;
use crate::sqlite::Sqlite;
use crate::sqlite::sql::Lent;

impl ClaimTx for Sqlite {
    fn claim_tx(&self, claims: &dyn ClaimSteps) -> Result<Vec<Claim>> {
        self.write_tx(|conn| {
            (0..claims.requests().len())
                .map(|i| claims.claim(&mut Lent(conn), i))
                .collect()
        })
    }
}
