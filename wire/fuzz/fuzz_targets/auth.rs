//! Request authentication on arbitrary bytes, as a node with ACL on reads them: `strip` never
//! panics and leaves an unsigned frame alone; a trailer that verifies under the fuzzer's
//! key (the fuzzer never holds it unless it found a forgery) is impossible, so any input
//! that verifies must be exactly what `sign` makes of the stripped frame with that trailer's
//! stamp: no second encoding of a signed request exists. The same for remoting: a
//! `Signature` that verifies equals the one `RemotingKey::signature` computes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_wire::auth::{self, NativeKey, RemotingKey};
use ringmq_wire::remoting::frame as rframe;

const SECRET: &[u8] = b"fuzz-secret";

fuzz_target!(|data: &[u8]| {
    let key = NativeKey::new(SECRET);
    let mut f = data.to_vec();
    match auth::strip(&mut f) {
        Ok(None) => assert_eq!(f, data, "an unsigned frame is left as it is"),
        Ok(Some(signed)) => {
            if signed.verify(&key, &f) {
                let mut again = f.clone();
                auth::sign(&mut again, &signed.access_key, &key, signed.stamp)
                    .expect("a verified frame signs again");
                assert_eq!(again, data, "a second encoding of a signed request verified");
            }
        }
        Err(_) => assert_eq!(f, data, "a refused trailer leaves the frame unchanged"),
    }
    if let Ok(p) = rframe::parse(data) {
        let rk = RemotingKey::new(SECRET);
        if let Some(sig) = p.command.ext_fields.get(auth::SIGNATURE_FIELD) {
            if rk.verify(&p.command.ext_fields, p.body, sig) {
                assert_eq!(
                    rk.signature(&p.command.ext_fields, p.body),
                    sig.trim(),
                    "a remoting signature verified that the key did not make"
                );
            }
        }
    }
});
