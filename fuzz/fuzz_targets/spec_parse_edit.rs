//! Fuzz target `spec_parse_edit`: bytes -> `Document::from_bytes` -> validate -> select ->
//! every edit kind on every task -> re-parse; see `kern_fuzz::check` for the properties.
//!
//! Built with the `libfuzzer` feature (the default) it is a cargo-fuzz target. Built with
//! `--no-default-features` it is a plain binary for a stable toolchain without libFuzzer:
//! `spec_parse_edit DIR...` replays every file of the folders, and
//! `spec_parse_edit --generate N [SEED] [OUT_DIR]` checks N generated inputs (and saves them,
//! so they can seed a cargo-fuzz corpus). A failing input is written to `crash-<n>` and the
//! binary panics.
#![cfg_attr(feature = "libfuzzer", no_main)]

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kern_fuzz::check(data);
});

#[cfg(not(feature = "libfuzzer"))]
fn main() {
    use std::path::PathBuf;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = |data: &[u8], name: &str| {
        let result = std::panic::catch_unwind(|| kern_fuzz::check(data));
        if let Err(panic) = result {
            let path = PathBuf::from(format!("crash-{name}"));
            let _ = std::fs::write(&path, data);
            eprintln!("crash: input saved to {}", path.display());
            std::panic::resume_unwind(panic);
        }
    };
    let started = std::time::Instant::now();
    let mut executions: u64 = 0;
    if args.first().map(String::as_str) == Some("--generate") {
        let count: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
        let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
        let out = args.get(3).map(PathBuf::from);
        if let Some(dir) = &out {
            std::fs::create_dir_all(dir).expect("cannot create the output folder");
        }
        let mut rng = kern_fuzz::Rng::new(seed);
        for n in 0..count {
            let data = kern_fuzz::generate(&mut rng);
            if let Some(dir) = &out {
                std::fs::write(dir.join(format!("gen-{seed}-{n}")), &data)
                    .expect("cannot write an input");
            }
            run(&data, &format!("gen-{seed}-{n}"));
            executions += 1;
        }
    } else {
        for dir in &args {
            let entries = std::fs::read_dir(dir).expect("cannot read the corpus folder");
            for entry in entries.flatten() {
                let Ok(data) = std::fs::read(entry.path()) else {
                    continue;
                };
                run(&data, &entry.file_name().to_string_lossy());
                executions += 1;
            }
        }
    }
    eprintln!(
        "spec_parse_edit: {executions} inputs, no failure, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
