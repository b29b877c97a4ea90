//! One way to take a `Mutex` everywhere: sluice's locks guard state that every change leaves
//! whole (a push, an insert, a swap), so a panic in another holder leaves it usable, and
//! refusing every later request over it would turn one bug into an outage.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock `m`, taking it over if a holder panicked.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_still_taken() {
        let m = std::sync::Arc::new(Mutex::new(vec![1]));
        let held = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = held.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        lock(&m).push(2);
        assert_eq!(*lock(&m), [1, 2]);
    }
}
