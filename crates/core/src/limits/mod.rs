//! Rate limits and budgets: requests per minute, tokens per minute, parallel requests and
//! spend, per key, team, user, end user and organization. In memory and lock-free on one instance (sliding windows over atomics);
//! the fleet version shares the same counters through Redis (keys and limits work).

mod limiter;
mod window;

pub use limiter::{
    admit, admit_counted, admit_reserving, budget_left, charge_all, dollars, nanos, Counters,
    Exceeded, Limits, Nanos, Permit, Rejected, Remaining, Scope, Subject, SubjectKind, Subjects,
};
pub use window::Window;

/// Wall-clock milliseconds since the Unix epoch: limit windows and budget windows are shared
/// across instances (and with the store), so they run on the wall clock, not a process one.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
