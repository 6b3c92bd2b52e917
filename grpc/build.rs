//! Generates the Rust types and the server trait of RocketMQ 5's gRPC protocol from the
//! vendored `proto/apache/rocketmq/v2/{definition,service}.proto` (see `proto/README.md`).
//! Needs `protoc` on the PATH (or `PROTOC`) and the `google/protobuf/*.proto` files the
//! protocol imports: Debian's `protobuf-compiler` and `libprotobuf-dev`, which
//! `scripts/test.sh` installs.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(
            &[
                "proto/apache/rocketmq/v2/definition.proto",
                "proto/apache/rocketmq/v2/service.proto",
            ],
            &["proto"],
        )?;
    Ok(())
}
