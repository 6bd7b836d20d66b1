//! The effects a settling script applies in the call that removes a job's reservation
//! (`scripts/lib/effects.lua`). Each is a name and its arguments, its keys following the
//! script's own. The queue layer writes only `holds`; capabilities above it add their own
//! effects through a [`SettleStep`](super::settle::SettleStep), and the scripts know them by
//! name.

use redis::ScriptInvocation;

use crate::queue::hold::Hold;

/// The effects of one settling call, in the order the script applies them.
#[derive(Debug, Default)]
pub struct Effects {
    keys: Vec<String>,
    args: Vec<String>,
}

impl Effects {
    /// Adds the effect `name`, which reads `keys` and `args` in turn.
    pub(crate) fn add(
        &mut self,
        name: &str,
        keys: impl IntoIterator<Item = String>,
        args: impl IntoIterator<Item = String>,
    ) {
        self.keys.extend(keys);
        self.args.push(name.to_owned());
        self.args.extend(args);
    }

    /// Frees what the job held.
    pub(crate) fn holds(&mut self, holds: &[Hold]) {
        if holds.is_empty() {
            return;
        }
        let keys = holds.iter().map(|hold| hold.key.clone());
        let count = std::iter::once(holds.len().to_string());
        let owners = holds.iter().map(|hold| hold.owner.clone());
        self.add("holds", keys, count.chain(owners));
    }

    /// Adds the effects' keys and arguments to a settling script's call, after its own.
    pub(crate) fn add_to(&self, call: &mut ScriptInvocation<'_>) {
        for key in &self.keys {
            call.key(key);
        }
        for arg in &self.args {
            call.arg(arg);
        }
    }
}
