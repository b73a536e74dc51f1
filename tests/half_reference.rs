//! CPU test of the f16/bf16 rounding reference the device GPU tests compare against.

#[path = "common/half_ref.rs"]
mod half_ref;

#[test]
fn round_to_is_correctly_rounded() {
    half_ref::self_test();
}
