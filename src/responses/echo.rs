//! A streamed Responses answer naming what it continued, as OpenAI's do: the request reached
//! the provider without `previous_response_id` and `conversation` (sluice put the items they
//! stand for in its `input`), so the response objects its events carry
//! (`response.created`, `.in_progress`, `.completed`, `.incomplete`, `.failed`) get them back
//! as they pass. Other events pass as they came.

use serde_json::{Map, Value};

use sluice_translate::sse::{events, last_event_end_after};

use crate::http::Reshape;

/// The members to give back, and the bytes of an event not yet whole.
#[derive(Debug)]
pub(crate) struct EchoContinued {
    fields: Map<String, Value>,
    carry: Vec<u8>,
}

impl EchoContinued {
    /// Events whose response objects get `fields`.
    pub(crate) fn new(fields: Map<String, Value>) -> Self {
        Self {
            fields,
            carry: Vec::new(),
        }
    }

    /// One whole event, its response object (if it has one) naming what it continued.
    fn event(&self, event: &[u8], out: &mut Vec<u8>) {
        let mut data_lines = event
            .split_inclusive(|b| *b == b'\n')
            .filter(|l| l.starts_with(b"data:"));
        let (Some(line), None) = (data_lines.next(), data_lines.next()) else {
            out.extend_from_slice(event);
            return;
        };
        let body = line[5..].strip_prefix(b" ").unwrap_or(&line[5..]);
        let ending = if body.ends_with(b"\r\n") {
            2
        } else {
            usize::from(body.ends_with(b"\n"))
        };
        let json = &body[..body.len() - ending];
        let rewritten = serde_json::from_slice::<Value>(json)
            .ok()
            .and_then(|mut v| {
                let o = v.get_mut("response")?.as_object_mut()?;
                for (k, f) in &self.fields {
                    o.insert(k.clone(), f.clone());
                }
                serde_json::to_vec(&v).ok()
            });
        let Some(rewritten) = rewritten else {
            out.extend_from_slice(event);
            return;
        };
        for l in event.split_inclusive(|b| *b == b'\n') {
            if l.as_ptr() == line.as_ptr() {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&rewritten);
                out.extend_from_slice(&body[body.len() - ending..]);
            } else {
                out.extend_from_slice(l);
            }
        }
    }
}

impl Reshape for EchoContinued {
    fn feed(&mut self, data: &[u8]) -> Vec<u8> {
        let from = self.carry.len();
        self.carry.extend_from_slice(data);
        let Some(end) = last_event_end_after(&self.carry, from) else {
            return Vec::new();
        };
        let done: Vec<u8> = self.carry.drain(..end).collect();
        let mut out = Vec::with_capacity(done.len() + 96);
        let mut at = 0;
        for (s, e) in events(&done) {
            out.extend_from_slice(&done[at..s]);
            self.event(&done[s..e], &mut out);
            at = e;
        }
        out.extend_from_slice(&done[at..]);
        out
    }

    fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn response_objects_name_what_they_continued() {
        let fields: Map<String, Value> =
            serde_json::from_value(json!({"previous_response_id": "resp_1"})).unwrap();
        let mut echo = EchoContinued::new(fields);
        let stream = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_2\"}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
            "event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_2\"}}\r\n\r\n",
        );
        let (a, b) = stream.as_bytes().split_at(40);
        let mut out = echo.feed(a);
        out.extend(echo.feed(b));
        out.extend(echo.finish());
        let text = String::from_utf8(out).unwrap();
        let datas: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d.trim_end()).unwrap())
            .collect();
        assert_eq!(datas.len(), 3);
        assert_eq!(datas[0]["response"]["previous_response_id"], "resp_1");
        assert_eq!(
            datas[1],
            json!({"type": "response.output_text.delta", "delta": "Hi"})
        );
        assert_eq!(datas[2]["response"]["previous_response_id"], "resp_1");
        assert!(text.contains("event: response.completed\r\ndata: "));
        assert!(text.ends_with("}\r\n\r\n"));
    }
}
