//! The names people gave the keys, teams and users a page lists by id: a key's alias and its
//! abbreviation (`sk-...abcd`), a team's alias, a user's alias and email. One query for a
//! whole page, however many rows it has (an `IN` list per kind, joined by `UNION ALL`), so a
//! page of 200 log rows costs one round trip, not 200.

use std::collections::HashMap;

use super::objects::IDS_PER_QUERY;
use super::{col, Store, StoreError};

/// A key's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyNames {
    /// Its alias, if it has one.
    pub alias: Option<String>,
    /// Its abbreviation (`sk-...abcd`: the key's last four characters).
    pub key_name: String,
    /// Its team.
    pub team_id: Option<String>,
    /// Its user.
    pub user_id: Option<String>,
}

/// A team's or user's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HolderNames {
    /// Its alias, if it has one.
    pub alias: Option<String>,
    /// A user's email.
    pub email: Option<String>,
}

/// The names found; ids the store does not have (a deleted key) are absent.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// By key hash.
    pub keys: HashMap<String, KeyNames>,
    /// By team id.
    pub teams: HashMap<String, HolderNames>,
    /// By user id.
    pub users: HashMap<String, HolderNames>,
}

/// The ids to name: key hashes, team ids, user ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct Named<'a> {
    /// Key hashes.
    pub keys: &'a [&'a str],
    /// Team ids.
    pub teams: &'a [&'a str],
    /// User ids.
    pub users: &'a [&'a str],
}

impl Store {
    /// The names of the keys, teams and users `ids` lists: one query when there are at most
    /// 500 of each (a page's worth), one more per further 500.
    pub async fn names(&self, ids: Named<'_>) -> Result<Names, StoreError> {
        let mut names = Names::default();
        let mut chunks = [
            ids.keys.chunks(IDS_PER_QUERY),
            ids.teams.chunks(IDS_PER_QUERY),
            ids.users.chunks(IDS_PER_QUERY),
        ];
        loop {
            let parts: [&[&str]; 3] = [
                chunks[0].next().unwrap_or_default(),
                chunks[1].next().unwrap_or_default(),
                chunks[2].next().unwrap_or_default(),
            ];
            if parts.iter().all(|p| p.is_empty()) {
                return Ok(names);
            }
            self.names_once(parts, &mut names).await?;
        }
    }

    async fn names_once(
        &self,
        [keys, teams, users]: [&[&str]; 3],
        names: &mut Names,
    ) -> Result<(), StoreError> {
        let mut n = 0;
        let mut list = |len: usize| {
            let p: Vec<String> = (n + 1..=n + len).map(|i| format!("${i}")).collect();
            n += len;
            p.join(", ")
        };
        let mut selects = Vec::new();
        for (ids, select) in [
            (
                keys,
                "SELECT 'k' AS kind, token AS id, key_alias AS alias, key_name AS extra, \
                 team_id, user_id FROM keys WHERE token IN",
            ),
            (
                teams,
                "SELECT 't' AS kind, team_id AS id, team_alias AS alias, \
                 CAST(NULL AS TEXT) AS extra, CAST(NULL AS TEXT) AS team_id, \
                 CAST(NULL AS TEXT) AS user_id FROM teams WHERE team_id IN",
            ),
            (
                users,
                "SELECT 'u' AS kind, user_id AS id, user_alias AS alias, user_email AS extra, \
                 CAST(NULL AS TEXT) AS team_id, CAST(NULL AS TEXT) AS user_id \
                 FROM users WHERE user_id IN",
            ),
        ] {
            if !ids.is_empty() {
                selects.push(format!("{select} ({})", list(ids.len())));
            }
        }
        let sql = selects.join(" UNION ALL ");
        let mut q = sqlx::query(&sql);
        for id in keys.iter().chain(teams).chain(users) {
            q = q.bind((*id).to_owned());
        }
        for row in q.fetch_all(self.pool()).await? {
            let kind: String = col(&row, "kind")?;
            let id: String = col(&row, "id")?;
            let alias: Option<String> = col(&row, "alias")?;
            let extra: Option<String> = col(&row, "extra")?;
            match kind.as_str() {
                "k" => {
                    let key = KeyNames {
                        alias,
                        key_name: extra.unwrap_or_default(),
                        team_id: col(&row, "team_id")?,
                        user_id: col(&row, "user_id")?,
                    };
                    names.keys.insert(id, key);
                }
                "t" => {
                    names.teams.insert(id, HolderNames { alias, email: None });
                }
                _ => {
                    let user = HolderNames {
                        alias,
                        email: extra,
                    };
                    names.users.insert(id, user);
                }
            }
        }
        Ok(())
    }
}
