//! Where a relayed request's progress steps go.
//!
//! rmcp gives every request it sends a progress token of its own, and the
//! sender learns that token only once the request has left. A step can
//! therefore arrive before its call is bound to the token. [`Routes`] holds
//! such early steps (a few, while some call is still being bound) and hands
//! them over at [`Routes::bind`], so no step is lost to that gap and none
//! reaches a call it is not for.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Early steps kept while calls are being bound; past this the oldest go.
const EARLY: usize = 32;

/// Destinations `D` by token key `K`, for steps `S`.
pub struct Routes<K, D, S> {
    bound: HashMap<K, D>,
    /// Calls whose request is leaving and whose token is not bound yet.
    binding: usize,
    early: VecDeque<(K, S)>,
}

impl<K, D, S> Default for Routes<K, D, S> {
    fn default() -> Self {
        Routes {
            bound: HashMap::new(),
            binding: 0,
            early: VecDeque::new(),
        }
    }
}

impl<K: Eq + Hash + Clone, D: Clone, S> Routes<K, D, S> {
    /// A call's request is about to leave; end it with `bind` or `abandon`.
    pub fn expect(&mut self) {
        self.binding += 1;
    }

    /// The call's token is known: later steps go to `dest`, and the steps
    /// that came before are returned, in order.
    pub fn bind(&mut self, key: K, dest: D) -> Vec<S> {
        self.binding = self.binding.saturating_sub(1);
        let (mine, rest): (VecDeque<_>, VecDeque<_>) =
            self.early.drain(..).partition(|(k, _)| *k == key);
        self.early = rest;
        if self.binding == 0 {
            self.early.clear();
        }
        self.bound.insert(key, dest);
        mine.into_iter().map(|(_, s)| s).collect()
    }

    /// A request that never left: nothing will bind.
    pub fn abandon(&mut self) {
        self.binding = self.binding.saturating_sub(1);
        if self.binding == 0 {
            self.early.clear();
        }
    }

    /// The call is over: its token routes nowhere again.
    pub fn forget(&mut self, key: &K) {
        self.bound.remove(key);
    }

    /// Where a step goes now. A step for no bound call is kept while a
    /// call is being bound (it may be that call's), else dropped.
    pub fn route(&mut self, key: K, step: S) -> Option<(D, S)> {
        if let Some(dest) = self.bound.get(&key) {
            return Some((dest.clone(), step));
        }
        if self.binding > 0 {
            if self.early.len() == EARLY {
                self.early.pop_front();
            }
            self.early.push_back((key, step));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_before_the_bind_reaches_its_call_and_no_other() {
        let mut r: Routes<u32, &str, u8> = Routes::default();
        r.expect();
        r.expect();
        assert!(r.route(7, 1).is_none(), "kept: a call is being bound");
        assert!(r.route(8, 2).is_none());
        assert_eq!(r.bind(7, "a"), [1]);
        assert_eq!(r.route(7, 3), Some(("a", 3)));
        assert_eq!(r.bind(8, "b"), [2], "the other call's early step waited");
        r.forget(&7);
        assert!(r.route(7, 4).is_none());
    }

    #[test]
    fn steps_for_no_call_are_dropped() {
        let mut r: Routes<u32, &str, u8> = Routes::default();
        assert!(r.route(1, 1).is_none());
        r.expect();
        assert!(r.bind(1, "a").is_empty(), "nothing was being bound then");
        r.expect();
        r.route(9, 9);
        r.abandon();
        r.expect();
        assert!(
            r.bind(9, "late").is_empty(),
            "cleared when nobody was binding"
        );
    }

    #[test]
    fn early_steps_are_bounded() {
        let mut r: Routes<u32, &str, usize> = Routes::default();
        r.expect();
        for i in 0..100 {
            r.route(1, i);
        }
        let kept = r.bind(1, "a");
        assert_eq!(kept.len(), EARLY);
        assert_eq!(kept.first(), Some(&(100 - EARLY)));
    }
}
