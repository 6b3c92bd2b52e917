//! Deterministic values from bytes, for property tests and fuzzing: [`Sample::sample`] turns
//! any byte string into a valid value of a wire type (the idea of the `arbitrary` crate, with
//! no dependency). Shorter input gives smaller values: an exhausted [`Gen`] yields zeros, so
//! every list ends and shrinking the bytes shrinks the value.
//!
//! Values are kept small (lists of at most [`SAMPLE_ITEMS_MAX`] items, short strings) so a
//! property test of nested types stays fast.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{Blob, Empty};

/// Most items a sampled list or map holds.
pub const SAMPLE_ITEMS_MAX: usize = 4;
/// Longest sampled string, in characters.
pub const SAMPLE_CHARS_MAX: usize = 12;

/// Characters sampled strings are made of: ASCII, the tag-expression operators, and
/// multi-byte UTF-8.
const ALPHABET: &[char] = &[
    'a', 'b', 'Z', '0', '9', '_', '-', '%', '*', '|', ' ', ':', '.', 'é', 'ß', '中', '😀',
];

/// A cursor over the input bytes.
#[derive(Debug, Clone)]
pub struct Gen<'a> {
    data: &'a [u8],
}

impl<'a> Gen<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Gen { data }
    }

    /// Bytes not yet used.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// The next byte, or 0 once the input is used up.
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn fill<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        for b in &mut a {
            *b = self.byte();
        }
        a
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.fill())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.fill())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.fill())
    }

    /// A number in `0..=max`.
    pub fn below_or(&mut self, max: usize) -> usize {
        usize::from(self.byte()) % (max + 1)
    }

    /// One of `items` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[usize::from(self.byte()) % items.len()]
    }
}

/// A wire type that can be sampled from bytes.
pub trait Sample: Sized {
    fn sample(g: &mut Gen<'_>) -> Self;

    /// A value from `data` (convenience for tests and fuzz targets).
    fn from_bytes(data: &[u8]) -> Self {
        Self::sample(&mut Gen::new(data))
    }
}

impl Sample for u8 {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.byte()
    }
}

impl Sample for u16 {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.u16()
    }
}

impl Sample for u32 {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.u32()
    }
}

impl Sample for u64 {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.u64()
    }
}

impl Sample for i32 {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.u32() as i32
    }
}

impl Sample for i64 {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.u64() as i64
    }
}

impl Sample for bool {
    fn sample(g: &mut Gen<'_>) -> Self {
        g.byte() & 1 == 1
    }
}

impl Sample for String {
    fn sample(g: &mut Gen<'_>) -> Self {
        let len = g.below_or(SAMPLE_CHARS_MAX);
        (0..len).map(|_| g.pick(ALPHABET)).collect()
    }
}

impl Sample for Empty {
    fn sample(_g: &mut Gen<'_>) -> Self {
        Empty
    }
}

impl Sample for Blob {
    fn sample(g: &mut Gen<'_>) -> Self {
        let len = g.below_or(4 * SAMPLE_CHARS_MAX);
        Blob((0..len).map(|_| g.byte()).collect())
    }
}

impl<T: Sample> Sample for Option<T> {
    fn sample(g: &mut Gen<'_>) -> Self {
        if g.byte() & 1 == 1 {
            Some(T::sample(g))
        } else {
            None
        }
    }
}

impl<T: Sample> Sample for super::Appended<T> {
    fn sample(g: &mut Gen<'_>) -> Self {
        super::Appended(T::sample(g))
    }
}

impl<T: Sample> Sample for Vec<T> {
    fn sample(g: &mut Gen<'_>) -> Self {
        let len = g.below_or(SAMPLE_ITEMS_MAX);
        (0..len).map(|_| T::sample(g)).collect()
    }
}

impl<K: Sample + Ord, V: Sample> Sample for BTreeMap<K, V> {
    fn sample(g: &mut Gen<'_>) -> Self {
        let len = g.below_or(SAMPLE_ITEMS_MAX);
        (0..len).map(|_| (K::sample(g), V::sample(g))).collect()
    }
}

impl Sample for SocketAddr {
    fn sample(g: &mut Gen<'_>) -> Self {
        let ip = if g.byte() & 1 == 0 {
            IpAddr::V4(Ipv4Addr::from(g.u32()))
        } else {
            let hi = u128::from(g.u64()) << 64;
            IpAddr::V6(Ipv6Addr::from(hi | u128::from(g.u64())))
        };
        SocketAddr::new(ip, g.u16())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_gives_the_smallest_values() {
        assert_eq!(String::from_bytes(&[]), "");
        assert_eq!(Vec::<u32>::from_bytes(&[]), Vec::<u32>::new());
        assert_eq!(Option::<u8>::from_bytes(&[]), None);
    }

    #[test]
    fn same_bytes_same_value() {
        let data: Vec<u8> = (0..200u8).collect();
        let a = Vec::<String>::from_bytes(&data);
        assert_eq!(a, Vec::<String>::from_bytes(&data));
        assert!(String::from_bytes(&[5, 15, 16]).chars().count() == 5);
    }
}
