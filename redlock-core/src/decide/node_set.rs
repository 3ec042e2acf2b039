//! A set of node indexes as bits: the first 64 nodes in one word, so that
//! a round over a usual deployment (3, 5, 7 nodes) allocates nothing for
//! the replies it wants or the nodes it skips.

/// Node indexes `0..n` as bits: nodes below 64 in `low`, the others in
/// `high` (word `i` holds nodes `64 * (i + 1)..`), empty until needed.
/// Two sets are equal when they hold the same nodes.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeSet {
    low: u64,
    high: Vec<u64>,
}

impl PartialEq for NodeSet {
    fn eq(&self, other: &NodeSet) -> bool {
        let (short, long) = if self.high.len() <= other.high.len() {
            (&self.high, &other.high)
        } else {
            (&other.high, &self.high)
        };
        self.low == other.low
            && short.iter().zip(long.iter()).all(|(a, b)| a == b)
            && long[short.len()..].iter().all(|&w| w == 0)
    }
}

impl Eq for NodeSet {}

impl NodeSet {
    /// No node.
    pub(crate) const fn new() -> Self {
        NodeSet {
            low: 0,
            high: Vec::new(),
        }
    }

    /// Nodes `0..n`.
    pub(crate) fn all(n: usize) -> Self {
        let mut set = NodeSet::new();
        if n >= 64 {
            set.low = u64::MAX;
            let rest = n - 64;
            set.high = vec![u64::MAX; rest / 64];
            if rest % 64 != 0 {
                set.high.push((1u64 << (rest % 64)) - 1);
            }
        } else {
            set.low = (1u64 << n) - 1;
        }
        set
    }

    /// The word holding `node` and its bit in it, if that word exists.
    fn word(&self, node: usize) -> Option<(u64, u64)> {
        let bit = 1u64 << (node % 64);
        match node / 64 {
            0 => Some((self.low, bit)),
            i => self.high.get(i - 1).map(|&w| (w, bit)),
        }
    }

    /// Whether `node` is in the set.
    pub(crate) fn contains(&self, node: usize) -> bool {
        self.word(node).is_some_and(|(w, bit)| w & bit != 0)
    }

    /// Adds `node`.
    pub(crate) fn insert(&mut self, node: usize) {
        let bit = 1u64 << (node % 64);
        match node / 64 {
            0 => self.low |= bit,
            i => {
                if self.high.len() < i {
                    self.high.resize(i, 0);
                }
                self.high[i - 1] |= bit;
            }
        }
    }

    /// Takes `node` out; whether it was in.
    pub(crate) fn remove(&mut self, node: usize) -> bool {
        let bit = 1u64 << (node % 64);
        let word = match node / 64 {
            0 => &mut self.low,
            i => match self.high.get_mut(i - 1) {
                Some(w) => w,
                None => return false,
            },
        };
        let was = *word & bit != 0;
        *word &= !bit;
        was
    }

    /// How many nodes are in the set.
    pub(crate) fn len(&self) -> usize {
        let high: u32 = self.high.iter().map(|w| w.count_ones()).sum();
        (self.low.count_ones() + high) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_set_is_the_flags_it_was_given(flags in proptest::collection::vec(any::<bool>(), 0..200)) {
            let n = flags.len();
            let mut set = NodeSet::new();
            for (node, _) in flags.iter().enumerate().filter(|(_, f)| **f) {
                set.insert(node);
            }
            for (node, flag) in flags.iter().enumerate() {
                prop_assert_eq!(set.contains(node), *flag);
            }
            prop_assert!(!set.contains(n) && !set.contains(n + 64));
            prop_assert_eq!(set.len(), flags.iter().filter(|f| **f).count());
            let mut rest = NodeSet::all(n);
            for (node, _) in flags.iter().enumerate().filter(|(_, f)| **f) {
                rest.remove(node);
            }
            for (node, flag) in flags.iter().enumerate() {
                prop_assert_eq!(rest.contains(node), !*flag);
            }
            let mut emptied = set.clone();
            for (node, flag) in flags.iter().enumerate() {
                prop_assert_eq!(emptied.remove(node), *flag);
            }
            prop_assert_eq!(emptied.len(), 0);
            prop_assert!(!emptied.remove(n + 300));
        }
    }

    #[test]
    fn all_takes_every_node_below_n() {
        for n in [0, 1, 5, 63, 64, 65, 128, 130] {
            let all = NodeSet::all(n);
            assert_eq!(all.len(), n);
            assert!((0..n).all(|node| all.contains(node)));
            assert!(!all.contains(n));
        }
    }
}
