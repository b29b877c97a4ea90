//! End-to-end: the endpoints beyond text (images, audio, moderations, rerank) through the
//! gateway to the mock over HTTP and to a recording upstream: bodies as the provider gets
//! them, answers as the client gets them, and what each request is charged.
use crate::common::*;
use sluice_mock::MockSettings;

fn config(mock_base: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: dall-e-3
    litellm_params:
      model: openai/dall-e-3
      api_base: {mock_base}
      api_key: sk-upstream-secret
  - model_name: whisper
    litellm_params:
      model: openai/whisper-1
      api_base: {mock_base}
  - model_name: transcribe
    litellm_params:
      model: openai/gpt-4o-transcribe
      api_base: {mock_base}
  - model_name: tts
    litellm_params:
      model: openai/tts-1
      api_base: {mock_base}
  - model_name: moderation
    litellm_params:
      model: openai/omni-moderation-latest
      api_base: {mock_base}
  - model_name: rerank
    litellm_params:
      model: cohere/rerank-v3.5
      api_base: {mock_base}
  - model_name: claude
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_key: sk-ant
      api_base: {mock_base}
  - model_name: ocr
    litellm_params:
      model: mistral/mistral-ocr-latest
      api_base: {mock_base}
      api_key: sk-mistral
general_settings:
  master_key: sk-master
"#
    )
}

/// A multipart form with text fields and one file.
fn form(boundary: &str, fields: &[(&str, &str)], file: (&str, &[u8])) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"audio.wav\"\r\n\
             Content-Type: audio/wav\r\n\r\n",
            file.0
        )
        .as_bytes(),
    );
    out.extend_from_slice(file.1);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn cost(a: &Answer) -> f64 {
    a.header("x-sluice-response-cost")
        .unwrap_or_else(|| panic!("no cost header: {:?}", a.headers))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn images_are_generated_and_priced_per_pixel() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    let a = post(
        &gw.url("/v1/images/generations"),
        r#"{"model":"dall-e-3","prompt":"a red fox","n":2,"size":"1024x1024","response_format":"b64_json"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert!(v["data"][0]["b64_json"].as_str().unwrap().len() > 10);
    // Two standard 1024×1024 DALL·E 3 images at LiteLLM's per-pixel rate: $0.04 each.
    assert!((cost(&a) - 0.08).abs() < 1e-6, "{}", cost(&a));
    let r = gw.next_record().await;
    assert_eq!(r.status, 200);
    assert_eq!(r.usage.unwrap().images, 2);
    // Without /v1, with URLs.
    let a = post(
        &gw.url("/images/generations"),
        r#"{"model":"dall-e-3","prompt":"p"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.json()["data"][0]["url"].as_str().is_some());
}

#[tokio::test]
async fn a_transcription_upload_reaches_the_upstream_byte_for_byte() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    // 3 s of "audio" with every byte value, CRLFs and a near-boundary inside.
    let mut audio: Vec<u8> = (0..96_000u32).map(|i| (i % 256) as u8).collect();
    audio.extend_from_slice(b"\r\n--sluice-boundar\r\n");
    let body = form(
        "sluice-boundary",
        &[("model", "whisper"), ("response_format", "verbose_json")],
        ("file", &audio),
    );
    let a = send(
        "POST",
        &gw.url("/v1/audio/transcriptions"),
        body,
        &[
            MASTER,
            (
                "content-type",
                "multipart/form-data; boundary=sluice-boundary",
            ),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    let tail = format!("[{} bytes fnv1a {:016x}]", audio.len(), fnv1a(&audio));
    assert!(v["text"].as_str().unwrap().ends_with(&tail), "{v}");
    assert_eq!(v["duration"], 4.0);
    // Whisper: $0.0001 a second (LiteLLM's output_cost_per_second).
    assert!((cost(&a) - 0.0004).abs() < 1e-9, "{}", cost(&a));
    let r = gw.next_record().await;
    assert_eq!(r.usage.unwrap().audio_ms, 4000);
}

#[tokio::test]
async fn the_upstream_model_is_spliced_into_the_form() {
    let up = recording(Reply::Json(200, r#"{"text":"ok"}"#)).await;
    let yaml = format!(
        r#"
model_list:
  - model_name: whisper
    litellm_params:
      model: openai/whisper-large-v3
      api_base: {}
"#,
        up.base()
    );
    let gw = gateway(&yaml).await;
    let body = form(
        "b0",
        &[("model", "whisper"), ("language", "en")],
        ("file", b"RIFF"),
    );
    let a = send(
        "POST",
        &gw.url("/audio/translations"),
        body,
        &[("content-type", "multipart/form-data; boundary=b0")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path_and_query, "/v1/audio/translations");
    assert_eq!(
        seen[0].headers["content-type"],
        "multipart/form-data; boundary=b0"
    );
    let expect = form(
        "b0",
        &[("model", "whisper-large-v3"), ("language", "en")],
        ("file", b"RIFF"),
    );
    assert_eq!(
        String::from_utf8_lossy(&seen[0].body),
        String::from_utf8_lossy(&expect)
    );
}

#[tokio::test]
async fn transcripts_in_every_format_and_streamed() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let ct = ("content-type", "multipart/form-data; boundary=B");
    for (format, expect) in [
        ("text", "bytes fnv1a"),
        ("srt", "00:00:00,000 --> "),
        ("vtt", "WEBVTT"),
    ] {
        let body = form(
            "B",
            &[("model", "whisper"), ("response_format", format)],
            ("file", b"x"),
        );
        let a = send(
            "POST",
            &gw.url("/v1/audio/transcriptions"),
            body,
            &[MASTER, ct],
        )
        .await;
        assert_eq!(a.status, 200, "{format}: {}", a.text());
        assert!(a.text().contains(expect), "{format}: {}", a.text());
    }
    let body = form(
        "B",
        &[("model", "transcribe"), ("stream", "true")],
        ("file", b"abc"),
    );
    let a = send(
        "POST",
        &gw.url("/v1/audio/transcriptions"),
        body,
        &[MASTER, ct],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(!a.body_error);
    let events = a.sse_data();
    let last: serde_json::Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["type"], "transcript.text.done");
    assert_eq!(last["usage"]["type"], "tokens");
}

#[tokio::test]
async fn speech_streams_audio_bytes_and_is_priced_per_character() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    let a = send(
        "POST",
        &gw.url("/v1/audio/speech"),
        r#"{"model":"tts","input":"Hello there, sluice.","voice":"alloy"}"#,
        &[MASTER, ("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("content-type"), Some("audio/mpeg"));
    assert!(!a.body_error);
    assert_eq!(a.body.len(), 20 * 64);
    assert!(a.frames.len() > 1, "streamed as it arrived");
    let r = gw.next_record().await;
    assert_eq!(r.usage.unwrap().characters, 20);
    // tts-1: $15 per million characters.
    assert_eq!(r.cost, Some(300_000), "20 × $0.000015 in nano-dollars");
    // stream_format: sse
    let a = post(
        &gw.url("/v1/audio/speech"),
        r#"{"model":"tts","input":"hi","voice":"alloy","stream_format":"sse"}"#,
    )
    .await;
    assert_eq!(a.status, 200);
    let events = a.sse_data();
    assert!(events.last().unwrap().contains("speech.audio.done"));
}

#[tokio::test]
async fn moderations_and_rerank() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    let a = post(
        &gw.url("/v1/moderations"),
        r#"{"model":"moderation","input":["hello","a violent threat"]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["results"][1]["flagged"], true);
    assert_eq!(gw.next_record().await.status, 200);
    for path in ["/v1/rerank", "/v2/rerank", "/rerank"] {
        let a = post(
            &gw.url(path),
            r#"{"model":"rerank","query":"red fox","documents":["blue sky",{"text":"a red fox"}],"top_n":1,"return_documents":true}"#,
        )
        .await;
        assert_eq!(a.status, 200, "{path}: {}", a.text());
        let v = a.json();
        assert_eq!(v["results"][0]["index"], 1);
        assert_eq!(v["results"][0]["document"]["text"], "a red fox");
        // One search unit of rerank-v3.5: $0.002.
        assert!((cost(&a) - 0.002).abs() < 1e-12);
    }
}

#[tokio::test]
async fn ocr_reaches_mistral_and_is_charged_per_page() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    let a = post(
        &gw.url("/v1/ocr"),
        r#"{"model":"ocr","document":{"type":"document_url","document_url":"https://arxiv.org/pdf/2201.04234"},"include_image_base64":false}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["pages"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["model"], "mistral-ocr-latest");
    // Two pages of mistral-ocr-latest at $0.004 each (LiteLLM's price map).
    assert!((cost(&a) - 0.008).abs() < 1e-12, "{}", cost(&a));
    let r = gw.next_record().await;
    assert_eq!(r.usage.map(|u| u.pages), Some(2));
    // A provider without OCR says so, naming itself and the endpoint.
    let refused = post(
        &gw.url("/v1/ocr"),
        r#"{"model":"claude","document":{"type":"document_url","document_url":"https://x/y.pdf"}}"#,
    )
    .await;
    assert_eq!(refused.status, 501, "{}", refused.text());
    assert!(refused.text().contains("ocr"), "{}", refused.text());
}

#[tokio::test]
async fn imagen_on_gemini_answers_in_openai_shape() {
    let mock = mock_server(MockSettings::default()).await;
    let yaml = format!(
        r#"
model_list:
  - model_name: imagen
    litellm_params:
      model: gemini/imagen-3.0-generate-002
      api_base: http://{}
      api_key: g-key
general_settings:
  master_key: sk-master
"#,
        mock.addr
    );
    let mut gw = gateway(&yaml).await;
    let a = post(
        &gw.url("/v1/images/generations"),
        r#"{"model":"imagen","prompt":"a red fox","n":2,"size":"1792x1024"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert!(v["data"][0]["b64_json"].as_str().unwrap().len() > 10);
    // Imagen 3 at LiteLLM's $0.04 an image.
    assert!((cost(&a) - 0.08).abs() < 1e-9, "{}", cost(&a));
    assert_eq!(gw.next_record().await.usage.unwrap().images, 2);
    // A bad request is refused before the upstream, in OpenAI's shape.
    let a = post(&gw.url("/v1/images/generations"), r#"{"model":"imagen"}"#).await;
    assert_eq!(a.status, 400, "{}", a.text());
}

#[tokio::test]
async fn a_provider_without_the_endpoint_is_a_501_naming_the_pair() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let a = post(
        &gw.url("/v1/images/generations"),
        r#"{"model":"claude","prompt":"p"}"#,
    )
    .await;
    assert_eq!(a.status, 501, "{}", a.text());
    let msg = a.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains("anthropic") && msg.contains("image_generations"),
        "{msg}"
    );
    // Bad forms are 400s in OpenAI's shape.
    for (ct, body) in [
        ("multipart/form-data", "x"),
        ("multipart/form-data; boundary=Q", "garbage"),
        (
            "multipart/form-data; boundary=Q",
            "--Q\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx\r\n--Q--",
        ),
    ] {
        let a = send(
            "POST",
            &gw.url("/v1/audio/transcriptions"),
            body,
            &[MASTER, ("content-type", ct)],
        )
        .await;
        assert_eq!(a.status, 400, "{ct} {body}: {}", a.text());
        assert!(a.json()["error"]["message"].is_string());
    }
    // Speech cannot be asked to stream as JSON events through `stream`.
    let a = post(
        &gw.url("/v1/moderations"),
        r#"{"model":"moderation","input":"x","stream":true}"#,
    )
    .await;
    assert_eq!(a.status, 400);
}

/// The key pair the mock checks Bedrock's SigV4 signatures against.
const AWS_KEY: &str = "AKIDMOCKEXAMPLE";
const AWS_SECRET: &str = "mock/secret+KEY";

async fn signing_mock() -> MockServer {
    mock_server(MockSettings {
        aws: Some((AWS_KEY.to_owned(), AWS_SECRET.to_owned())),
        ..MockSettings::default()
    })
    .await
}

#[tokio::test]
async fn bedrock_titan_and_stability_images_are_signed_translated_and_priced() {
    use base64::Engine as _;
    let mock = signing_mock().await;
    let deployment = |name: &str, model: &str, secret: &str| {
        format!(
            r#"
  - model_name: {name}
    litellm_params:
      model: bedrock/{model}
      api_base: http://{}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {secret}
      aws_region_name: us-west-2"#,
            mock.addr
        )
    };
    let yaml = format!(
        "model_list:{}{}{}{}\nrouter_settings:\n  num_retries: 0\ngeneral_settings:\n  master_key: sk-master\n",
        deployment("titan", "amazon.titan-image-generator-v2:0", AWS_SECRET),
        deployment("sd3", "stability.sd3-5-large-v1:0", AWS_SECRET),
        deployment("titan-wrong-secret", "amazon.titan-image-generator-v1", "not-it"),
        deployment("claude", "anthropic.claude-3-5-sonnet-20240620-v1:0", AWS_SECRET),
    );
    let mut gw = gateway(&yaml).await;
    let key = send(
        "POST",
        &gw.url("/key/generate"),
        r#"{"models":["titan","sd3"],"max_budget":10}"#,
        &[MASTER, ("content-type", "application/json")],
    )
    .await
    .json()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let bearer = format!("Bearer {key}");
    let as_key = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let decoded = |v: &serde_json::Value, i: usize| {
        base64::engine::general_purpose::STANDARD
            .decode(v["data"][i]["b64_json"].as_str().unwrap())
            .unwrap()
    };
    let spent = |a: &Answer| -> f64 { a.header("x-sluice-key-spend").unwrap().parse().unwrap() };

    // Titan: two images, each the mock's drawing of the prompt, at $0.008 an image.
    let a = send(
        "POST",
        &gw.url("/v1/images/generations"),
        r#"{"model":"titan","prompt":"a red fox","n":2,"size":"1024x1024","quality":"hd","response_format":"url"}"#,
        &as_key,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert!(v["data"][0].get("url").is_none(), "always b64_json: {v}");
    assert_eq!(decoded(&v, 0), sluice_mock::image_png("a red fox", 0));
    assert_eq!(decoded(&v, 1), sluice_mock::image_png("a red fox", 1));
    assert!(v["created"].as_u64().unwrap() > 0);
    assert!((cost(&a) - 0.016).abs() < 1e-9, "{}", cost(&a));
    assert!((spent(&a) - 0.016).abs() < 1e-9, "{}", spent(&a));
    let mut r = gw.next_record().await;
    while r.route != "/v1/images/generations" {
        r = gw.next_record().await; // the key's creation
    }
    assert_eq!(r.provider, Some("bedrock"));
    assert_eq!(r.usage.unwrap().images, 2);
    assert_eq!(r.cost, Some(16_000_000));

    // SD3.5 Large: the size becomes the nearest aspect ratio the mock accepts; $0.08 an image.
    let a = send(
        "POST",
        &gw.url("/v1/images/generations"),
        r#"{"model":"sd3","prompt":"a red fox","size":"1792x1024","negative_prompt":"dogs"}"#,
        &as_key,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        decoded(&a.json(), 0),
        sluice_mock::image_png("a red fox", 0)
    );
    assert!((cost(&a) - 0.08).abs() < 1e-9, "{}", cost(&a));
    assert!((spent(&a) - 0.096).abs() < 1e-9, "{}", spent(&a));
    assert_eq!(gw.next_record().await.usage.unwrap().images, 1);
    // Both are in the key's spend log.
    let logged = eventually(std::time::Duration::from_secs(10), || async {
        let rows = send(
            "GET",
            &gw.url(&format!("/spend/logs?api_key={key}")),
            "",
            &[MASTER],
        )
        .await
        .json();
        let spend = |group: &str| {
            rows.as_array()
                .into_iter()
                .flatten()
                .find(|l| l["model_group"] == group)
                .and_then(|l| l["spend"].as_f64())
        };
        spend("titan").is_some_and(|s| (s - 0.016).abs() < 1e-9)
            && spend("sd3").is_some_and(|s| (s - 0.08).abs() < 1e-9)
    })
    .await;
    assert!(logged, "both images are in the key's spend log");

    // Refused before the upstream: Stability draws one image a call.
    let a = post(
        &gw.url("/v1/images/generations"),
        r#"{"model":"sd3","prompt":"a red fox","n":2}"#,
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["param"], "n");
    // The upstream's filter and AWS's errors come back with their status, in OpenAI's shape
    // (a filter reason in a whole answer is a bad answer); a Bedrock model that does not draw
    // answers 501 naming the pair.
    for (model, prompt, status, says) in [
        ("titan", "a forbidden fox", 400, "content filters"),
        ("sd3", "a forbidden fox", 502, "Filter reason: prompt"),
        ("titan-wrong-secret", "a red fox", 403, "signature"),
        ("claude", "a red fox", 501, "image_generations"),
    ] {
        let body = serde_json::json!({"model": model, "prompt": prompt}).to_string();
        let a = post(&gw.url("/v1/images/generations"), &body).await;
        assert_eq!(a.status, status, "{model}: {}", a.text());
        let message = a.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(says), "{model}: {message}");
    }
}

#[tokio::test]
async fn tei_rerank_is_translated_to_and_from_cohere_shape() {
    let mock = mock_server(MockSettings::default()).await;
    let yaml = format!(
        r#"
model_list:
  - model_name: tei
    litellm_params:
      model: huggingface/BAAI/bge-reranker-base
      api_base: http://{}/
      input_cost_per_query: 0.001
general_settings:
  master_key: sk-master
"#,
        mock.addr
    );
    let mut gw = gateway(&yaml).await;
    let a = post(
        &gw.url("/v1/rerank"),
        r#"{"model":"tei","query":"red fox","documents":["blue sky",{"text":"a red fox"},"a fox"],"top_n":2,"return_documents":true}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    // The mock scored all three in TEI's shape; sluice sorted, cut at top_n and wrote Cohere's.
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert_eq!(results[0]["index"], 1);
    assert_eq!(results[0]["document"]["text"], "a red fox");
    assert_eq!(results[1]["index"], 2);
    assert!(results[0]["relevance_score"].as_f64() > results[1]["relevance_score"].as_f64());
    assert_eq!(v["meta"]["billed_units"]["search_units"], 1);
    assert!(v["id"].as_str().unwrap().starts_with("rerank-"));
    // One search unit at the deployment's price.
    assert!((cost(&a) - 0.001).abs() < 1e-12, "{}", cost(&a));
    assert_eq!(gw.next_record().await.usage.unwrap().search_units, 1);
    // Without return_documents, no documents; TEI's own errors pass through as they are.
    let a = post(
        &gw.url("/v2/rerank"),
        r#"{"model":"tei","query":"fox","documents":["a fox"]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.json()["results"][0].get("document").is_none());
    let a = post(
        &gw.url("/v1/rerank"),
        r#"{"model":"tei","query":"fox","documents":[]}"#,
    )
    .await;
    assert_eq!(a.status, 422, "{}", a.text());
    assert_eq!(a.json()["error_type"], "Validation");
}

#[tokio::test]
async fn compatible_rerankers_are_called_where_litellm_calls_them() {
    let up = recording(Reply::Json(
        200,
        r#"{"object":"rerank","id":"r1","results":[{"index":0,"relevance_score":0.9,"document":"a fox"}],"usage":{"prompt_tokens":7,"total_tokens":7}}"#,
    ))
    .await;
    let base = format!("http://{}", up.addr);
    let yaml = format!(
        r#"
model_list:
  - model_name: together
    litellm_params: {{model: together_ai/Salesforce/Llama-Rank-V1, api_base: "{base}/v1", api_key: k}}
  - model_name: vllm
    litellm_params: {{model: hosted_vllm/BAAI/bge-reranker-v2-m3, api_base: "{base}/v1"}}
  - model_name: vllm-route
    litellm_params: {{model: hosted_vllm/BAAI/bge-reranker-v2-m3, api_base: "{base}/v1/rerank"}}
  - model_name: infinity
    litellm_params: {{model: infinity/mixedbread-ai/mxbai-rerank-xsmall-v1, api_base: "{base}"}}
general_settings:
  master_key: sk-master
"#
    );
    let gw = gateway(&yaml).await;
    let body = |model: &str| {
        format!(
            r#"{{"model":"{model}","query":"fox","documents":["a fox"],"return_documents":true}}"#
        )
    };
    for (group, path, upstream_model) in [
        ("together", "/v1/rerank", "Salesforce/Llama-Rank-V1"),
        ("vllm", "/v1/rerank", "BAAI/bge-reranker-v2-m3"),
        ("vllm-route", "/rerank", "BAAI/bge-reranker-v2-m3"),
        (
            "infinity",
            "/rerank",
            "mixedbread-ai/mxbai-rerank-xsmall-v1",
        ),
    ] {
        let a = post(&gw.url("/v1/rerank"), &body(group)).await;
        assert_eq!(a.status, 200, "{group}: {}", a.text());
        let seen = up.requests().pop().unwrap();
        assert_eq!(seen.path_and_query, path, "{group}");
        // Cohere's request, with the upstream's model spliced in.
        let sent: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
        assert_eq!(sent["model"], upstream_model, "{group}");
        assert_eq!(sent["documents"][0], "a fox");
        // Infinity's bare-string document is written in Cohere's shape; the others pass on.
        let document = &a.json()["results"][0]["document"];
        if group == "infinity" {
            assert_eq!(document, &serde_json::json!({"text": "a fox"}));
        } else {
            assert_eq!(document, "a fox", "{group}: passed through unchanged");
        }
    }
}

#[tokio::test]
async fn images_are_priced_by_quality_and_size_as_litellm_prices_them() {
    let mock = signing_mock().await;
    let yaml = format!(
        r#"
model_list:
  - model_name: dall-e-3
    litellm_params: {{model: openai/dall-e-3, api_base: "{base}"}}
  - model_name: dall-e-2
    litellm_params: {{model: openai/dall-e-2, api_base: "{base}"}}
  - model_name: sdxl
    litellm_params:
      model: bedrock/stability.stable-diffusion-xl-v1
      api_base: http://{addr}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {AWS_SECRET}
general_settings:
  master_key: sk-master
"#,
        base = mock.base(),
        addr = mock.addr,
    );
    let gw = gateway(&yaml).await;
    let tall = 1024.0 * 1792.0;
    for (body, want) in [
        // hd/1024-x-1792/dall-e-3: $0.12 an image.
        (
            r#"{"model":"dall-e-3","prompt":"p","size":"1024x1792","quality":"hd","n":2}"#,
            2.0 * 6.539e-8 * tall,
        ),
        // standard/1792-x-1024/dall-e-3 (no quality is standard): $0.08.
        (
            r#"{"model":"dall-e-3","prompt":"p","size":"1792x1024"}"#,
            4.359e-8 * tall,
        ),
        // hd/1024-x-1024/dall-e-3: $0.08.
        (
            r#"{"model":"dall-e-3","prompt":"p","quality":"hd"}"#,
            7.629e-8 * 1024.0 * 1024.0,
        ),
        // 256-x-256/dall-e-2, whatever the quality: $0.016.
        (
            r#"{"model":"dall-e-2","prompt":"p","size":"256x256","quality":"standard"}"#,
            2.4414e-7 * 256.0 * 256.0,
        ),
        // SDXL on Bedrock: 1024-x-1024/50-steps, for the size it draws nearest the request's.
        (
            r#"{"model":"sdxl","prompt":"a red fox","size":"1792x1024"}"#,
            0.04,
        ),
    ] {
        let a = post(&gw.url("/v1/images/generations"), body).await;
        assert_eq!(a.status, 200, "{body}: {}", a.text());
        assert!(
            (cost(&a) - want).abs() < 1e-6,
            "{body}: {} != {want}",
            cost(&a)
        );
    }
}
