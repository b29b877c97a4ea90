//! Names, not hashes: how every page shows a key (its alias and last four characters,
//! `app-one (sk-...abcd)`; a key without an alias as `sk-...abcd`), a team (its alias) and a
//! user (alias, else email), linked to their pages. A page gathers the ids it lists and asks
//! the store for all their names in one read ([`Names::of`]); an id the store no longer has
//! (a deleted key) is shown as it is, and a page whose names cannot be read still shows (ids
//! instead of names, the failure logged).

use std::collections::BTreeSet;

use maud::{html, Markup};

use super::{query, store};
use crate::console::Viewer;
use crate::server::AppState;

/// What a key without a hash is: the master key's requests (or an open gateway's).
const MASTER: &str = "master key";

/// The names of the keys, teams and users one page lists.
#[derive(Debug, Default)]
pub(super) struct Names(sluice_store::Names);

/// The ids a page lists, gathered before its one read of names.
#[derive(Debug, Default)]
pub(super) struct Wanted<'a> {
    keys: BTreeSet<&'a str>,
    teams: BTreeSet<&'a str>,
    users: BTreeSet<&'a str>,
}

impl<'a> Wanted<'a> {
    /// A key hash to name (empty: none).
    pub(super) fn key(&mut self, hash: &'a str) -> &mut Self {
        if !hash.is_empty() {
            self.keys.insert(hash);
        }
        self
    }

    /// A team id to name (empty: none).
    pub(super) fn team(&mut self, id: &'a str) -> &mut Self {
        if !id.is_empty() {
            self.teams.insert(id);
        }
        self
    }

    /// A user id to name (empty: none).
    pub(super) fn user(&mut self, id: &'a str) -> &mut Self {
        if !id.is_empty() {
            self.users.insert(id);
        }
        self
    }
}

impl Names {
    /// The names of everything `wanted` lists: one read of the store.
    pub(super) async fn of(state: &AppState, wanted: &Wanted<'_>) -> Self {
        let keys: Vec<&str> = wanted.keys.iter().copied().collect();
        let teams: Vec<&str> = wanted.teams.iter().copied().collect();
        let users: Vec<&str> = wanted.users.iter().copied().collect();
        let ids = sluice_store::Named {
            keys: &keys,
            teams: &teams,
            users: &users,
        };
        let Ok(s) = store(state) else {
            return Self::default();
        };
        match s.names(ids).await {
            Ok(names) => Self(names),
            Err(e) => {
                tracing::warn!(error = %e, "console: names could not be read; showing ids");
                Self::default()
            }
        }
    }

    /// A key as people know it: `alias (sk-...abcd)`, `sk-...abcd` without an alias, the
    /// master key for none, a hash's first twelve digits for a key the store no longer has.
    pub(super) fn key(&self, hash: &str) -> String {
        if hash.is_empty() {
            return MASTER.to_owned();
        }
        match self.0.keys.get(hash) {
            Some(k) => match &k.alias {
                Some(alias) => format!("{alias} ({})", k.key_name),
                None => k.key_name.clone(),
            },
            None => format!("{}… (deleted)", super::short(hash)),
        }
    }

    /// The key's name, linked to its page while it exists (the hash in the title).
    pub(super) fn key_link(&self, hash: &str) -> Markup {
        if hash.is_empty() {
            return html! { span.muted { (MASTER) } };
        }
        html! {
            @if self.0.keys.contains_key(hash) {
                a href={ "/ui/keys/edit?" (query(&[("key", hash)])) } title=(hash) { (self.key(hash)) }
            } @else {
                span.mono title=(hash) { (self.key(hash)) }
            }
        }
    }

    /// A team as people know it: its alias, else its id.
    pub(super) fn team(&self, id: &str) -> String {
        self.0
            .teams
            .get(id)
            .and_then(|t| t.alias.clone())
            .unwrap_or_else(|| id.to_owned())
    }

    /// The team's name, linked to its page for a viewer who may open it, while it exists
    /// (its id in the title).
    pub(super) fn team_link(&self, id: &str, viewer: &Viewer) -> Markup {
        if id.is_empty() {
            return html! {};
        }
        let opens = self.0.teams.contains_key(id)
            && (viewer.session.role.sees_all() || viewer.team_admin.as_deref() == Some(id));
        html! {
            @if opens {
                a href={ "/ui/teams/edit?" (query(&[("team_id", id)])) } title=(id) { (self.team(id)) }
            } @else {
                span title=(id) { (self.team(id)) }
            }
        }
    }

    /// A user as people know them: alias, else email, else id.
    pub(super) fn user(&self, id: &str) -> String {
        self.0
            .users
            .get(id)
            .and_then(|u| u.alias.clone().or_else(|| u.email.clone()))
            .unwrap_or_else(|| id.to_owned())
    }

    /// The user's name, linked to their page for a viewer who may open it, while they exist.
    pub(super) fn user_link(&self, id: &str, viewer: &Viewer) -> Markup {
        if id.is_empty() {
            return html! {};
        }
        html! {
            @if viewer.session.role.sees_all() && self.0.users.contains_key(id) {
                a href={ "/ui/users/edit?" (query(&[("user_id", id)])) } title=(id) { (self.user(id)) }
            } @else {
                span title=(id) { (self.user(id)) }
            }
        }
    }

    /// The alias and abbreviation of a key, for exports: `("", "")` for none.
    pub(super) fn key_parts(&self, hash: &str) -> (&str, &str) {
        self.0.keys.get(hash).map_or(("", ""), |k| {
            (k.alias.as_deref().unwrap_or_default(), k.key_name.as_str())
        })
    }

    /// A team's alias, for exports ("" for none).
    pub(super) fn team_alias(&self, id: &str) -> &str {
        self.0
            .teams
            .get(id)
            .and_then(|t| t.alias.as_deref())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_store::{HolderNames, KeyNames};

    #[test]
    fn keys_show_alias_and_last_four_or_what_is_known() {
        let mut n = sluice_store::Names::default();
        n.keys.insert(
            "aa".repeat(32),
            KeyNames {
                alias: Some("app-one".into()),
                key_name: "sk-...abcd".into(),
                ..KeyNames::default()
            },
        );
        n.keys.insert(
            "bb".repeat(32),
            KeyNames {
                key_name: "sk-...wxyz".into(),
                ..KeyNames::default()
            },
        );
        n.teams.insert(
            "t1".into(),
            HolderNames {
                alias: Some("Search".into()),
                email: None,
            },
        );
        let names = Names(n);
        assert_eq!(names.key(&"aa".repeat(32)), "app-one (sk-...abcd)");
        assert_eq!(names.key(&"bb".repeat(32)), "sk-...wxyz");
        assert_eq!(names.key(""), "master key");
        assert_eq!(names.key(&"cc".repeat(32)), "cccccccccccc… (deleted)");
        assert_eq!(names.team("t1"), "Search");
        assert_eq!(names.team("t2"), "t2");
        assert_eq!(names.key_parts(&"aa".repeat(32)), ("app-one", "sk-...abcd"));
        let link = names.key_link(&"aa".repeat(32)).into_string();
        assert!(
            link.contains(&format!("/ui/keys/edit?key={}", "aa".repeat(32))),
            "{link}"
        );
    }
}
