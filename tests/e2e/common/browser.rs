//! A browser's part in the console's tests over HTTP: a cookie jar that sends back what the
//! console set, form posts, the sign-in form, and a page's CSRF token.

use std::time::{Duration, Instant};

use super::{send, Answer, Gateway, PATIENCE};

/// A browser's cookie jar for one test: the cookies the console set, sent back as a browser
/// would.
#[derive(Default)]
pub struct Browser {
    pub cookies: Vec<(String, String)>,
}

impl Browser {
    pub fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn keep(&mut self, a: &Answer) {
        for v in a.headers.get_all("set-cookie") {
            let v = v.to_str().unwrap();
            let (pair, _) = v.split_once(';').unwrap_or((v, ""));
            let (k, val) = pair.split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != k);
            if !v.contains("Max-Age=0") {
                self.cookies.push((k.to_owned(), val.to_owned()));
            }
        }
    }

    pub async fn get(&mut self, gw: &Gateway, path: &str) -> Answer {
        let cookie = self.cookie_header();
        let a = send("GET", &gw.url(path), "", &[("cookie", &cookie)]).await;
        self.keep(&a);
        a
    }

    /// `path`, asked again every 50 ms until `done` accepts the answer or [`PATIENCE`] has
    /// passed (a page showing what the gateway records off the request path); the last answer
    /// either way, for the caller's assertions.
    pub async fn get_until(
        &mut self,
        gw: &Gateway,
        path: &str,
        done: impl Fn(&Answer) -> bool,
    ) -> Answer {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let a = self.get(gw, path).await;
            if done(&a) || Instant::now() >= deadline {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn post(&mut self, gw: &Gateway, path: &str, form: &[(&str, &str)]) -> Answer {
        let cookie = self.cookie_header();
        let mut body = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            body.append_pair(k, v);
        }
        let a = send(
            "POST",
            &gw.url(path),
            body.finish(),
            &[
                ("cookie", &cookie),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
        )
        .await;
        self.keep(&a);
        a
    }

    /// Signs in through the form; returns the answer to the form post.
    pub async fn sign_in(&mut self, gw: &Gateway, user: &str, password: &str) -> Answer {
        let form = self.get(gw, "/ui/login").await;
        assert_eq!(form.status, 200);
        let csrf = csrf_of(&form.text());
        self.post(
            gw,
            "/ui/login",
            &[("csrf", &csrf), ("username", user), ("password", password)],
        )
        .await
    }
}

/// The CSRF token of the first form on a page.
pub fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a CSRF field");
    let rest = &html[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}
