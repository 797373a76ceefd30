//! Link arguments for the Python extension (the cdylib); nothing else is built here.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // rav1d's x86 assembly reads its Rust-defined tables (`dav1d_sgr_x_by_x`, ...) through
    // PC-relative relocations, which a shared object may only use for symbols bound inside
    // it; without this the extension fails to link once rav1d's assembly is in (rav1d issue
    // 1367). `-Bsymbolic` binds every reference in the extension to its own definitions, which
    // also keeps the `dav1d_*` functions rav1d exports from being interposed by a libdav1d
    // that another module (PyAV's FFmpeg) brings into the process.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    }
}
