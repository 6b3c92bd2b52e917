//! The receipt handle a gRPC client holds: the native POP receipt handle (8 space-separated
//! fields: checkpoint, pop time, invisible time, revive shard, retry mark, broker name,
//! queue id, queue offset) and, as a 9th field, the delivered record's physical offset,
//! which ForwardMessageToDeadLetterQueue needs. Clients treat it as opaque.

/// The handle given to a client for a native handle and its record's physical offset.
pub(crate) fn outward(native: &str, physical_offset: u64) -> String {
    format!("{native} {physical_offset}")
}

/// The native handle and, when the handle carries one, the record's physical offset.
pub(crate) fn inward(handle: &str) -> (&str, Option<u64>) {
    if handle.split(' ').count() == 9 {
        if let Some((native, off)) = handle.rsplit_once(' ') {
            if let Ok(off) = off.parse() {
                return (native, Some(off));
            }
        }
    }
    (handle, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let native = "3 1700000000000 30000 0 0 broker-a 2 3";
        let h = outward(native, 4096);
        assert_eq!(inward(&h), (native, Some(4096)));
        assert_eq!(inward(native), (native, None));
    }
}
