//! The seeded permutation of `0..n` behind the PyTorch samplers' epoch order (Python's
//! `gulpio_rs.torch.shuffled_positions`): a 6-round Feistel network on `2b` bits (`4^b >= n`)
//! keyed by splitmix64 of `(seed, epoch)`, restricted to `0..n` by cycle walking. Any element
//! and its inverse are computed in O(1) without building the permutation. The exact order is
//! part of the contract (the same on every machine and version), so this is specified here
//! bit for bit, and the Python reference in the tests must agree with it.

use crate::error::{Error, Result};

const ROUNDS: u64 = 6;
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function (no increment): the round function.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// splitmix64 of one step (increment, then mix): the keys.
fn mix_step(x: u64) -> u64 {
    mix(x.wrapping_add(GOLDEN))
}

/// The permutation of `0..n` for one `(seed, epoch)`.
pub struct Feistel {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; ROUNDS as usize],
}

impl Feistel {
    pub fn new(n: u64, seed: u64, epoch: u64) -> Feistel {
        // half = max(1, ceil(bits(n - 1) / 2)): the smallest square domain holding 0..n.
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let base = mix_step(seed ^ mix_step(epoch));
        let mut keys = [0; ROUNDS as usize];
        for (r, key) in keys.iter_mut().enumerate() {
            *key = mix_step(base.wrapping_add(r as u64));
        }
        Feistel {
            n,
            half,
            mask: (1u64 << half) - 1,
            keys,
        }
    }

    fn encrypt(&self, v: u64) -> u64 {
        let (mut left, mut right) = (v >> self.half, v & self.mask);
        for key in self.keys {
            (left, right) = (right, left ^ (mix(right ^ key) & self.mask));
        }
        (left << self.half) | right
    }

    fn decrypt(&self, v: u64) -> u64 {
        let (mut left, mut right) = (v >> self.half, v & self.mask);
        for key in self.keys.iter().rev() {
            (left, right) = (right ^ (mix(left ^ key) & self.mask), left);
        }
        (left << self.half) | right
    }

    /// Element `position` of the permutation (`inverse`: where `position` sits in it).
    /// Positions must be below `n` (the walk stays inside the square domain only from there).
    pub fn get(&self, position: u64, inverse: bool) -> Result<u64> {
        if self.n <= 1 {
            return Ok(0);
        }
        if position >= self.n {
            return Err(Error::InvalidArgument(format!(
                "position {position} is outside the permutation of {} elements",
                self.n
            )));
        }
        let step = |v| {
            if inverse {
                self.decrypt(v)
            } else {
                self.encrypt(v)
            }
        };
        // The domain is < 4n, so fewer than 4 steps on average.
        let mut v = step(position);
        while v >= self.n {
            v = step(v);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permutation_and_its_inverse() {
        for n in [1u64, 2, 3, 5, 64, 65, 1000, 4099] {
            let f = Feistel::new(n, 9, 4);
            let forward: Vec<u64> = (0..n).map(|p| f.get(p, false).unwrap()).collect();
            let mut sorted = forward.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            for (p, &x) in forward.iter().enumerate() {
                assert_eq!(f.get(x, true).unwrap(), p as u64);
            }
        }
    }

    #[test]
    fn the_order_is_part_of_the_contract() {
        // The same values the Python tests pin (test_torch_sampling.py).
        let f = Feistel::new(8, 0, 0);
        let got: Vec<u64> = (0..8).map(|p| f.get(p, false).unwrap()).collect();
        assert_eq!(got, vec![4, 6, 1, 0, 7, 2, 5, 3]);
        let f = Feistel::new(10, 12345, 7);
        let got: Vec<u64> = (0..10).map(|p| f.get(p, false).unwrap()).collect();
        assert_eq!(got, vec![9, 7, 0, 1, 6, 5, 4, 3, 2, 8]);
    }

    #[test]
    fn positions_outside_are_refused() {
        assert!(Feistel::new(10, 0, 0).get(10, false).is_err());
        assert!(Feistel::new(10, 0, 0).get(u64::MAX, true).is_err());
    }
}
