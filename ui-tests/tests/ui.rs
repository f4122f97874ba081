//! Every diagnostic proved by a compile-fail fixture with a committed `.stderr`, and the
//! accepted forms proved by pass fixtures. Regenerate with `TRYBUILD=overwrite`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
