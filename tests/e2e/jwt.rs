//! JWTs in place of virtual keys, end to end: an identity provider's JWK Set served on
//! loopback, ES256 tokens signed here; a team's token is held to the team's models and budget
//! and charged to it; the admin scope manages; expiry, audience, a made-up key, an unknown team
//! and a tampered token are refused; the provider rotating its key is followed.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

use crate::common::*;

const MASTER: &str = "sk-master-jwt";

/// A signing key and its JWK.
struct Signer {
    pair: EcdsaKeyPair,
    kid: String,
}

impl Signer {
    fn new(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pk8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pk8.as_ref(), &rng).unwrap();
        Self {
            pair,
            kid: kid.into(),
        }
    }

    fn jwk(&self) -> Value {
        let point = self.pair.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
               "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65])})
    }

    fn token(&self, claims: Value) -> String {
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": self.kid});
        let signing = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), signing.as_bytes())
            .unwrap();
        format!("{signing}.{}", B64.encode(sig.as_ref()))
    }
}

fn now() -> u64 {
    sluice_jwt::unix_now()
}

async fn chat(gw: &Gateway, token: &str, model: &str) -> Answer {
    chat_as(gw, token, model, "", &[]).await
}

#[tokio::test]
async fn an_identity_providers_tokens_stand_in_for_keys() {
    let first = Signer::new("k1");
    let jwks: Arc<Mutex<Value>> = Arc::new(Mutex::new(json!({"keys": [first.jwk()]})));
    let served = jwks.clone();
    let idp = serve_loopback(move |_req| {
        let body = served.lock().unwrap().to_string();
        async move { Response::new(Full::new(Bytes::from(body))) }
    })
    .await;
    let yaml = format!(
        "model_list:\n  - model_name: cheap\n    litellm_params:\n      model: mock/cheap\n      \
         input_cost_per_token: 0.000001\n      output_cost_per_token: 0.000002\n  \
         - model_name: other\n    litellm_params:\n      model: mock/other\n\
         general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.2\n  \
         enable_jwt_auth: true\n  litellm_jwtauth:\n    team_id_jwt_field: groups.team\n    \
         user_id_jwt_field: sub\nenvironment_variables:\n  JWT_PUBLIC_KEY_URL: {idp}/jwks\n  \
         JWT_AUDIENCE: sluice\n  JWT_ISSUER: https://idp.test\n"
    );
    let gw = gateway(&yaml).await;
    let team = admin_as(
        &gw,
        MASTER,
        "POST",
        "/team/new",
        json!({"team_id": "t-jwt", "models": ["cheap"], "max_budget": 0.00001}),
    )
    .await;
    assert_eq!(team.status, 200, "{}", team.text());
    let claims = |team: &str, exp: u64| {
        json!({"iss": "https://idp.test", "aud": "sluice", "sub": "alice", "exp": exp,
               "groups": {"team": team}})
    };
    let token = first.token(claims("t-jwt", now() + 600));

    // The team's token reaches the team's model, not another.
    let ok = chat(&gw, &token, "cheap").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let other = chat(&gw, &token, "other").await;
    assert_eq!(other.status, 401, "{}", other.text());
    assert_eq!(other.json()["error"]["code"], "model_not_allowed");
    // Its spend is the team's: the budget (about one request) is spent.
    let over = eventually(PATIENCE, || async {
        chat(&gw, &token, "cheap").await.status == 400
    })
    .await;
    assert!(over, "the team's budget holds for its tokens");

    // Refusals, each with its reason and never the token.
    for (bad, why) in [
        (first.token(claims("t-jwt", now() - 10)), "expired"),
        (first.token(claims("nobody", now() + 600)), "does not exist"),
        (
            first.token(
                json!({"iss": "https://idp.test", "aud": "other", "sub": "a",
                               "exp": now() + 600, "groups": {"team": "t-jwt"}}),
            ),
            "audience",
        ),
        (
            Signer::new("k1").token(claims("t-jwt", now() + 600)),
            "signature",
        ),
        (format!("{}x", &token[..token.len() - 1]), "signature"),
    ] {
        let a = chat(&gw, &bad, "cheap").await;
        assert_eq!(a.status, 401, "{why}: {}", a.text());
        assert_eq!(a.json()["error"]["code"], "invalid_jwt", "{why}");
        let message = a.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.to_lowercase().contains(why), "{why}: {message}");
        assert!(!a.text().contains(&bad), "the token is never echoed");
    }

    // The admin scope manages.
    let admin_token = first.token(json!({"iss": "https://idp.test", "aud": "sluice",
        "sub": "ops", "exp": now() + 600, "scope": "openid litellm_proxy_admin"}));
    let made = admin_as(&gw, &admin_token, "POST", "/key/generate", json!({})).await;
    assert_eq!(made.status, 200, "{}", made.text());

    // The provider rotates: a token under its new key is followed at once (a fetch a token
    // with an unknown key causes comes at most every 2 s after the last). Wall time: that
    // window is what has to pass before "at once" holds.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let second = Signer::new("k2");
    *jwks.lock().unwrap() = json!({"keys": [second.jwk()]});
    let rotated = second.token(
        json!({"iss": "https://idp.test", "aud": "sluice", "sub": "ops",
        "exp": now() + 600, "scope": "litellm_proxy_admin"}),
    );
    let after = admin_as(&gw, &rotated, "GET", "/key/list", Value::Null).await;
    assert_eq!(after.status, 200, "{}", after.text());
}

/// LiteLLM's mappings: role mappings (`roles_jwt_field`, `role_mappings`, `object_id_jwt_field`,
/// `enforce_rbac`), allowed roles, scopes mapped to models and routes, the end user from a
/// claim, `team_allowed_routes`, and a team and user made on first sight (upserts).
#[tokio::test]
async fn claims_map_to_roles_scopes_routes_end_users_and_new_teams() {
    let signer = Signer::new("m1");
    let jwks = json!({"keys": [signer.jwk()]}).to_string();
    let idp = serve_loopback(move |_req| {
        let body = jwks.clone();
        async move { Response::new(Full::new(Bytes::from(body))) }
    })
    .await;
    let yaml = format!(
        "model_list:\n  - model_name: cheap\n    litellm_params:\n      model: mock/cheap\n  \
         - model_name: other\n    litellm_params:\n      model: mock/other\n\
         general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.2\n  \
         enable_jwt_auth: true\n  litellm_jwtauth:\n    roles_jwt_field: realm.roles\n    \
         role_mappings:\n      - {{role: platform-admin, internal_role: proxy_admin}}\n      \
         - {{role: squad, internal_role: team}}\n    object_id_jwt_field: oid\n    \
         enforce_rbac: true\n    user_roles_jwt_field: realm.roles\n    \
         user_allowed_roles: [squad, platform-admin]\n    end_user_id_jwt_field: customer\n    \
         team_id_upsert: true\n    enforce_scope_based_access: true\n    scope_mappings:\n      \
         - {{scope: 'llm:cheap', models: [cheap], routes: [/v1/chat/completions]}}\n      \
         - {{scope: 'llm:other', models: [other]}}\n    \
         team_allowed_routes: [openai_routes, info_routes]\n\
         environment_variables:\n  JWT_PUBLIC_KEY_URL: {idp}/jwks\n"
    );
    let gw = gateway(&yaml).await;
    let token = |roles: Value, scope: &str, extra: Value| {
        let mut c = json!({"sub": "svc-1", "exp": now() + 600, "oid": "squad-a",
                           "realm": {"roles": roles}, "scope": scope});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        signer.token(c)
    };
    // A team the token names is made on first sight (team_id_upsert), and reached.
    let squad = token(json!(["squad"]), "llm:cheap", json!({"customer": "cust-9"}));
    let ok = chat(&gw, &squad, "cheap").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let info = admin_as(
        &gw,
        MASTER,
        "GET",
        "/team/info?team_id=squad-a",
        json!(null),
    )
    .await;
    assert_eq!(info.status, 200, "the upserted team: {}", info.text());
    // The end user is the claim's, over the body's `user`.
    let with_user = chat_as(&gw, &squad, "cheap", r#","user":"body-user""#, &[]).await;
    assert_eq!(with_user.status, 200);
    let logs = spend_logs(&gw, MASTER, 2).await;
    let ends: Vec<_> = logs
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["end_user"].clone())
        .collect();
    assert!(ends.iter().all(|e| e == "cust-9"), "{ends:?}");
    assert!(
        logs.as_array()
            .unwrap()
            .iter()
            .all(|l| l["team_id"] == "squad-a"),
        "{logs}"
    );

    // Its scope grants `cheap` only, and on chat completions only.
    let other = chat(&gw, &squad, "other").await;
    assert_eq!(other.status, 401, "{}", other.text());
    assert_eq!(other.json()["error"]["code"], "model_not_allowed");
    let emb = send(
        "POST",
        &gw.url("/v1/embeddings"),
        r#"{"model":"cheap","input":"x"}"#,
        &[
            ("authorization", &format!("Bearer {squad}")),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(emb.status, 403, "the scope's routes: {}", emb.text());
    // A token with both scopes reaches both models.
    let both = token(json!(["squad"]), "llm:cheap llm:other", json!({}));
    assert_eq!(chat(&gw, &both, "other").await.status, 200);
    // team_allowed_routes: no management route for a team's token.
    let gen = send(
        "POST",
        &gw.url("/key/generate"),
        "{}",
        &[
            ("authorization", &format!("Bearer {squad}")),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(gen.status, 403, "{}", gen.text());

    // A mapped admin role is the master key.
    let admin = token(json!(["platform-admin"]), "", json!({}));
    let made = admin_as(&gw, &admin, "POST", "/key/generate", json!({})).await;
    assert_eq!(made.status, 200, "{}", made.text());
    // No mapped role: refused (enforce_rbac), as is a role not allowed.
    let nobody = token(json!(["intern"]), "llm:cheap", json!({}));
    let refused = chat(&gw, &nobody, "cheap").await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains("role"), "{}", refused.text());
}
