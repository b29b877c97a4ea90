//! What a key or team has spent on one model since a time: where a per-model budget
//! (`model_max_budget`) starts when an instance first sees it. LiteLLM keeps that spend only in
//! its cache, so a restart forgets it; sluice reads it back from the spend logs.

use time::OffsetDateTime;

use super::{col, to_ms, Store, StoreError};

/// Whose spend on a model is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpentBy<'a> {
    /// A virtual key, by its hash.
    Key(&'a str),
    /// A team, by its id.
    Team(&'a str),
}

impl Store {
    /// The spend logged for `by` on `model_group` since `since` (0 when there is none).
    pub async fn model_spend(
        &self,
        by: SpentBy<'_>,
        model_group: &str,
        since: OffsetDateTime,
    ) -> Result<f64, StoreError> {
        let (column, id) = match by {
            SpentBy::Key(h) => ("api_key", h),
            SpentBy::Team(t) => ("team_id", t),
        };
        let sql = format!(
            "SELECT CAST(COALESCE(SUM(spend), 0) AS DOUBLE PRECISION) AS spent FROM spend_logs \
             WHERE {column} = $1 AND model_group = $2 AND start_time >= $3"
        );
        let row = sqlx::query(&sql)
            .bind(id.to_owned())
            .bind(model_group.to_owned())
            .bind(to_ms(since))
            .fetch_one(self.pool())
            .await?;
        col(&row, "spent")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyHash;
    use crate::spend_logs::SpendLog;
    use crate::testing::every_backend;
    use time::macros::datetime;

    #[tokio::test]
    async fn sums_one_holders_spend_on_one_model_since_a_time() {
        for t in every_backend().await {
            sums_on(&t.store).await;
        }
    }

    async fn sums_on(store: &Store) {
        let (k1, k2) = (KeyHash::of("sk-1"), KeyHash::of("sk-2"));
        let at = |i: i64| datetime!(2026-11-29 12:00 UTC) + time::Duration::minutes(i);
        let mut logs = Vec::new();
        for (i, (key, team, model, spend)) in [
            (&k1, "t1", "gpt", 1.0),
            (&k1, "t1", "gpt", 2.0),
            (&k1, "t1", "other", 4.0),
            (&k2, "t1", "gpt", 8.0),
        ]
        .into_iter()
        .enumerate()
        {
            let mut l = SpendLog::new(format!("r{i}"), model.into(), at(i as i64));
            l.api_key = Some(key.clone());
            l.team_id = Some(team.into());
            l.spend = spend;
            logs.push(l);
        }
        store.write_spend_batch(&logs).await.expect("write");
        let spent = |by, model, since| store.model_spend(by, model, since);
        let key1 = SpentBy::Key(k1.as_str());
        assert_eq!(spent(key1, "gpt", at(0)).await.unwrap(), 3.0);
        assert_eq!(spent(key1, "gpt", at(1)).await.unwrap(), 2.0);
        assert_eq!(
            spent(SpentBy::Team("t1"), "gpt", at(0)).await.unwrap(),
            11.0
        );
        assert_eq!(spent(SpentBy::Team("t2"), "gpt", at(0)).await.unwrap(), 0.0);
    }
}
