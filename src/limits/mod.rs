//! Rate limits: requests per minute, tokens per minute and parallel requests, per key, team,
//! user and end user. In memory and lock-free on one instance (sliding windows over atomics);
//! the fleet version shares the same counters through Redis (keys and limits work).

mod limiter;
mod window;

pub use limiter::{
    admit, Counters, Exceeded, Limits, Permit, Rejected, Remaining, Subject, SubjectKind,
};
pub use window::Window;
