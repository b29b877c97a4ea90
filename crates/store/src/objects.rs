//! Who owns the files, batches, videos and vector stores the gateway hands out (`owned_objects`): one row per upstream
//! object, keyed by its kind, the deployment that holds it and the upstream's own id, naming the
//! key (and team) that created it, so that every instance of a fleet lists a caller's own
//! objects only; and, for a batch, whether its usage was charged, flipped by one conditional
//! statement so that two instances (or two retrieves) cannot both charge it.

use std::collections::HashMap;

use time::OffsetDateTime;

use super::{col, from_ms, to_ms, Store, StoreError};

/// Most upstream ids one `IN (...)` query names (far below both databases' parameter limits).
pub(crate) const IDS_PER_QUERY: usize = 500;

/// What an owned object is: the kinds of OpenAI object the gateway rewrites ids of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A file (uploaded, or a batch's output or error file).
    File,
    /// A batch.
    Batch,
    /// A generated video.
    Video,
    /// A vector store.
    VectorStore,
}

impl ObjectKind {
    /// Its stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Batch => "batch",
            Self::Video => "video",
            Self::VectorStore => "vector_store",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "file" => Ok(Self::File),
            "batch" => Ok(Self::Batch),
            "video" => Ok(Self::Video),
            "vector_store" => Ok(Self::VectorStore),
            other => Err(StoreError::Corrupt {
                column: "kind",
                why: format!("unknown kind {other:?}"),
            }),
        }
    }
}

/// One owned object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedObject {
    /// File or batch.
    pub kind: ObjectKind,
    /// The deployment that holds it (its config id).
    pub deployment: String,
    /// The upstream's own id.
    pub upstream_id: String,
    /// The id the gateway showed its creator.
    pub sluice_id: String,
    /// The hex hash of the key that created it; `None` for the master key or an open gateway
    /// (then only the master key sees it).
    pub owner_key: Option<String>,
    /// That key's team when it was created.
    pub team_id: Option<String>,
    /// When the gateway first saw it.
    pub created_at: OffsetDateTime,
    /// A batch whose usage has been charged.
    pub charged: bool,
}

impl Store {
    /// Record an object's owner. An object already recorded keeps its first owner (a batch's
    /// output file is recorded on every retrieve); returns whether this call added the row.
    pub async fn add_object(&self, o: &OwnedObject) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO owned_objects (kind, deployment, upstream_id, sluice_id, owner_key, \
             team_id, created_at, charged) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (kind, deployment, upstream_id) DO NOTHING",
        )
        .bind(o.kind.as_str())
        .bind(o.deployment.clone())
        .bind(o.upstream_id.clone())
        .bind(o.sluice_id.clone())
        .bind(o.owner_key.clone())
        .bind(o.team_id.clone())
        .bind(to_ms(o.created_at))
        .bind(i64::from(o.charged))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One object's row.
    pub async fn object(
        &self,
        kind: ObjectKind,
        deployment: &str,
        upstream_id: &str,
    ) -> Result<Option<OwnedObject>, StoreError> {
        let row = sqlx::query(
            "SELECT * FROM owned_objects WHERE kind = $1 AND deployment = $2 AND upstream_id = $3",
        )
        .bind(kind.as_str())
        .bind(deployment.to_owned())
        .bind(upstream_id.to_owned())
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| {
            Ok(OwnedObject {
                kind: ObjectKind::parse(&col::<String>(&row, "kind")?)?,
                deployment: col(&row, "deployment")?,
                upstream_id: col(&row, "upstream_id")?,
                sluice_id: col(&row, "sluice_id")?,
                owner_key: col(&row, "owner_key")?,
                team_id: col(&row, "team_id")?,
                created_at: from_ms("created_at", col(&row, "created_at")?)?,
                charged: col::<i64>(&row, "charged")? != 0,
            })
        })
        .transpose()
    }

    /// The owners of those of `upstream_ids` (objects of `kind` on `deployment`) that are
    /// recorded: upstream id → owner key hash (`None`: the master key's). An id that is not in
    /// the map has no row (made upstream without the gateway, or before owners were kept).
    pub async fn object_owners(
        &self,
        kind: ObjectKind,
        deployment: &str,
        upstream_ids: &[&str],
    ) -> Result<HashMap<String, Option<String>>, StoreError> {
        let mut out = HashMap::with_capacity(upstream_ids.len());
        for chunk in upstream_ids.chunks(IDS_PER_QUERY) {
            let marks: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
            let sql = format!(
                "SELECT upstream_id, owner_key FROM owned_objects WHERE kind = $1 AND \
                 deployment = $2 AND upstream_id IN ({})",
                marks.join(", ")
            );
            let mut q = sqlx::query(&sql)
                .bind(kind.as_str())
                .bind(deployment.to_owned());
            for id in chunk {
                q = q.bind((*id).to_owned());
            }
            for row in q.fetch_all(self.pool()).await? {
                out.insert(col(&row, "upstream_id")?, col(&row, "owner_key")?);
            }
        }
        Ok(out)
    }

    /// Forget an object (deleted upstream); returns whether it had a row.
    pub async fn remove_object(
        &self,
        kind: ObjectKind,
        deployment: &str,
        upstream_id: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM owned_objects WHERE kind = $1 AND deployment = $2 AND upstream_id = $3",
        )
        .bind(kind.as_str())
        .bind(deployment.to_owned())
        .bind(upstream_id.to_owned())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Claim the charge of a batch: `Some(owner key hash)` (`Some(None)`: the master key's
    /// batch) to the one caller that flips its `charged` flag, `None` to every other. The flip is
    /// one `UPDATE ... WHERE charged = 0`, atomic on both databases, so two instances of a fleet
    /// that see the batch complete at once charge it once. A batch with no row (made before
    /// owners were kept) is inserted as `unknown` says, already charged.
    pub async fn claim_batch_charge(
        &self,
        unknown: &OwnedObject,
    ) -> Result<Option<Option<String>>, StoreError> {
        let flip = || async {
            let row = sqlx::query(
                "UPDATE owned_objects SET charged = 1 WHERE kind = $1 AND deployment = $2 AND \
                 upstream_id = $3 AND charged = 0 RETURNING owner_key",
            )
            .bind(ObjectKind::Batch.as_str())
            .bind(unknown.deployment.clone())
            .bind(unknown.upstream_id.clone())
            .fetch_optional(self.pool())
            .await?;
            row.map(|r| col::<Option<String>>(&r, "owner_key"))
                .transpose()
        };
        if let Some(owner) = flip().await? {
            return Ok(Some(owner));
        }
        let fresh = OwnedObject {
            kind: ObjectKind::Batch,
            charged: true,
            ..unknown.clone()
        };
        if self.add_object(&fresh).await? {
            return Ok(Some(fresh.owner_key));
        }
        // A row appeared between the two statements (its creation recorded late): one more
        // flip decides.
        flip().await
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::testing::every_backend;

    fn object(kind: ObjectKind, upstream: &str, owner: Option<&str>) -> OwnedObject {
        OwnedObject {
            kind,
            deployment: "dep-1".into(),
            upstream_id: upstream.into(),
            sluice_id: format!("sluice-{upstream}"),
            owner_key: owner.map(str::to_owned),
            team_id: owner.map(|_| "team-a".to_owned()),
            created_at: datetime!(2026-03-01 10:00 UTC),
            charged: false,
        }
    }

    #[tokio::test]
    async fn owners_are_kept_listed_and_forgotten() {
        for db in every_backend().await {
            let s = &db.store;
            let f = object(ObjectKind::File, "file-1", Some("aa"));
            assert!(s.add_object(&f).await.unwrap());
            // The first owner stays.
            assert!(!s
                .add_object(&object(ObjectKind::File, "file-1", Some("bb")))
                .await
                .unwrap());
            assert!(s
                .add_object(&object(ObjectKind::File, "file-2", None))
                .await
                .unwrap());
            // The same upstream id as a batch is another object.
            assert!(s
                .add_object(&object(ObjectKind::Batch, "file-1", Some("cc")))
                .await
                .unwrap());
            assert_eq!(
                s.object(ObjectKind::File, "dep-1", "file-1").await.unwrap(),
                Some(f.clone()),
                "{:?}",
                s.backend()
            );
            let owners = s
                .object_owners(ObjectKind::File, "dep-1", &["file-1", "file-2", "file-3"])
                .await
                .unwrap();
            assert_eq!(owners.len(), 2);
            assert_eq!(owners["file-1"].as_deref(), Some("aa"));
            assert_eq!(owners["file-2"], None);
            let many: Vec<String> = (0..1200).map(|i| format!("x{i}")).collect();
            let many: Vec<&str> = many.iter().map(String::as_str).collect();
            assert!(s
                .object_owners(ObjectKind::File, "other", &many)
                .await
                .unwrap()
                .is_empty());
            assert!(s
                .remove_object(ObjectKind::File, "dep-1", "file-1")
                .await
                .unwrap());
            assert_eq!(
                s.object(ObjectKind::File, "dep-1", "file-1").await.unwrap(),
                None
            );
        }
    }

    #[tokio::test]
    async fn a_batch_is_charged_once() {
        for db in every_backend().await {
            let s = &db.store;
            let b = object(ObjectKind::Batch, "batch-1", Some("aa"));
            s.add_object(&b).await.unwrap();
            // Whoever asks, the row's owner is charged, once.
            let asked = object(ObjectKind::Batch, "batch-1", Some("bb"));
            let (one, two) =
                tokio::join!(s.claim_batch_charge(&asked), s.claim_batch_charge(&asked));
            let mut claims = vec![one.unwrap(), two.unwrap()];
            claims.sort();
            assert_eq!(
                claims,
                [None, Some(Some("aa".to_owned()))],
                "{:?}",
                s.backend()
            );
            assert_eq!(s.claim_batch_charge(&b).await.unwrap(), None);
            assert!(
                s.object(ObjectKind::Batch, "dep-1", "batch-1")
                    .await
                    .unwrap()
                    .unwrap()
                    .charged
            );
            // A batch with no row: charged to the owner given, once.
            let unknown = object(ObjectKind::Batch, "batch-2", Some("cc"));
            assert_eq!(
                s.claim_batch_charge(&unknown).await.unwrap(),
                Some(Some("cc".to_owned()))
            );
            assert_eq!(s.claim_batch_charge(&unknown).await.unwrap(), None);
        }
    }
}
