//! The HTTP vocabulary every route shares: the response body, reading request bodies,
//! answers and errors as responses, the headers sluice names. It imports no other module
//! of this crate (the module graph test holds it so), which is what lets every feature use
//! it without depending on the server or on each other.

mod answer;
mod body;
mod headers;
mod read;

pub use answer::{
    error_response, json, json_as_declared, see_other, stream_response, upstream_answer,
};
pub use body::{BoxedBody, RelayError, Reshape, Reshaped, ResponseBody};
pub use headers::*;
pub use read::{collect_upstream, declared_length, read_body, MAX_UPSTREAM_BODY, MIN_UPLOAD_LIMIT};
