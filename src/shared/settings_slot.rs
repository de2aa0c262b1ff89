//! New settings from a SIGHUP reload (see [`crate::reload`]), waiting in
//! one worker's slot for the top of its next turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::Settings;

/// New settings waiting for one worker's next turn.
#[derive(Debug, Default)]
pub struct SettingsSlot {
    pending: AtomicBool,
    settings: Mutex<Option<Arc<Settings>>>,
}

impl SettingsSlot {
    /// Leaves `settings` for the worker (replacing any not yet taken).
    pub fn offer(&self, settings: Arc<Settings>) {
        if let Ok(mut slot) = self.settings.lock() {
            *slot = Some(settings);
            self.pending.store(true, Ordering::Release);
        }
    }

    /// The worker's check, once per turn: one atomic load unless a reload
    /// is waiting.
    pub fn take(&self) -> Option<Arc<Settings>> {
        if !self.pending.load(Ordering::Acquire) {
            return None;
        }
        let mut slot = self.settings.lock().ok()?;
        self.pending.store(false, Ordering::Release);
        slot.take()
    }

    /// Whether the worker has yet to take what was offered.
    pub fn is_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_slot_hands_over_the_latest_settings_once() {
        let slot = SettingsSlot::default();
        assert!(slot.take().is_none());
        let settings = Config::with_listen("127.0.0.1:0".parse().unwrap()).settings();
        let mut newer = settings.clone();
        newer.max_connections = 7;
        slot.offer(Arc::new(settings));
        slot.offer(Arc::new(newer));
        assert!(slot.is_pending());
        assert_eq!(slot.take().map(|s| s.max_connections), Some(7));
        assert!(!slot.is_pending());
        assert!(slot.take().is_none());
    }
}
