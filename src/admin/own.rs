//! What a virtual key may read of the management API about itself (LiteLLM's self-service
//! reads): `GET /key/info` of its own key, `GET /user/info` of its own user and
//! `GET /team/info` of its own team. Everything else on the management API needs the master
//! key; a valid key asking for it gets 403 naming what it may not do (401 stays for a key
//! that is not valid), so a client can tell a wrong key from a missing permission.

use http::Method;
use sluice_core::error::ApiError;
use sluice_core::trace_context::hex;

use crate::auth::{Directory, KeyEntry};

/// The query a virtual key's request is answered with, naming only what the key owns: its
/// own key (by hash), user or team, whatever the request named. `Err` when it names another
/// one, or asks for a route that needs the master key.
pub fn own_query(
    method: &Method,
    path: &str,
    query: &str,
    key: &KeyEntry,
    dir: &Directory,
) -> Result<String, ApiError> {
    let route = path.strip_prefix("/v1").unwrap_or(path);
    if method != Method::GET {
        return Err(ApiError::NotPermitted(
            "the management API's changes need the master key",
        ));
    }
    let named = |param: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == param)
            .map(|(_, v)| v.into_owned())
    };
    let pair = |param: &str, value: &str| {
        form_urlencoded::Serializer::new(String::new())
            .append_pair(param, value)
            .finish()
    };
    let info = &key.info;
    match route {
        "/key/info" => {
            let own = match named("key") {
                None => true,
                Some(k) if k.starts_with("sk-") => {
                    hex(&crate::auth::digest(&k)).eq_ignore_ascii_case(&info.hash)
                }
                Some(k) => k.eq_ignore_ascii_case(&info.hash),
            };
            if !own {
                // LiteLLM's answers: 404 for a key that does not exist, 403 for another's.
                let named = named("key").unwrap_or_default();
                let digest = if named.starts_with("sk-") {
                    Some(crate::auth::digest(&named))
                } else {
                    sluice_core::trace_context::unhex::<32>(named.as_bytes())
                };
                if digest.and_then(|d| dir.key(&d)).is_none() {
                    return Err(ApiError::NotFound {
                        what: "key",
                        id: String::new(),
                    });
                }
                return Err(ApiError::NotPermitted(
                    "a virtual key may read only its own key's info",
                ));
            }
            Ok(pair("key", &info.hash))
        }
        "/user/info" => {
            let Some(user) = info.user_id.as_deref() else {
                return Err(ApiError::NotPermitted("this key belongs to no user"));
            };
            if named("user_id").is_some_and(|u| u != user) {
                return Err(ApiError::NotPermitted(
                    "a virtual key may read only its own user's info",
                ));
            }
            Ok(pair("user_id", user))
        }
        "/team/info" => {
            let Some(team) = info.team_id.as_deref() else {
                return Err(ApiError::NotPermitted("this key belongs to no team"));
            };
            if named("team_id").is_some_and(|t| t != team) {
                return Err(ApiError::NotPermitted(
                    "a virtual key may read only its own team's info",
                ));
            }
            Ok(pair("team_id", team))
        }
        _ => Err(ApiError::NotPermitted(
            "this management route needs the master key",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{digest, ModelAccess, Stored};

    static DIR: std::sync::LazyLock<Directory> = std::sync::LazyLock::new(Directory::default);

    fn key(team: Option<&str>, user: Option<&str>) -> std::sync::Arc<KeyEntry> {
        DIR.put_key(
            digest("sk-own"),
            None,
            None,
            false,
            ModelAccess::All,
            team,
            user,
            &Stored::default(),
        )
    }

    #[test]
    fn a_key_reads_only_its_own_records() {
        let k = key(Some("t1"), Some("u1"));
        let hash = hex(&digest("sk-own"));
        let get = Method::GET;
        assert_eq!(
            own_query(&get, "/key/info", "", &k, &DIR).unwrap(),
            format!("key={hash}")
        );
        assert!(own_query(&get, "/key/info", "key=sk-own", &k, &DIR).is_ok());
        assert!(own_query(&get, "/key/info", &format!("key={hash}"), &k, &DIR).is_ok());
        assert!(own_query(&get, "/key/info", "key=sk-other", &k, &DIR).is_err());
        assert_eq!(
            own_query(&get, "/user/info", "", &k, &DIR).unwrap(),
            "user_id=u1"
        );
        assert!(own_query(&get, "/user/info", "user_id=u2", &k, &DIR).is_err());
        assert_eq!(
            own_query(&get, "/team/info", "team_id=t1", &k, &DIR).unwrap(),
            "team_id=t1"
        );
        assert!(own_query(&get, "/team/info", "team_id=t2", &k, &DIR).is_err());
        for (m, p) in [
            (Method::GET, "/key/list"),
            (Method::POST, "/key/generate"),
            (Method::GET, "/spend/logs"),
        ] {
            let e = own_query(&m, p, "", &k, &DIR).unwrap_err();
            assert_eq!(e.status(), http::StatusCode::FORBIDDEN, "{p}");
        }
        let loner = key(None, None);
        assert!(own_query(&get, "/team/info", "", &loner, &DIR).is_err());
    }
}
