//! Shell completions and man pages (issue 16 §7), generated from the parser
//! itself.

use loops_tests::TestEnv;

#[test]
fn completions_cover_every_shell_and_the_subcommands() {
    let env = TestEnv::new();
    for (shell, marker) in [
        ("bash", "complete -F _loops"),
        ("zsh", "#compdef loops"),
        ("fish", "complete -c loops"),
        ("elvish", "edit:completion:arg-completer[loops]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let ran = env.loops(["completions", shell]).run();
        assert!(
            ran.stdout.contains(marker),
            "{shell}: {}",
            &ran.stdout[..200]
        );
        // Subcommands and their flags are in the script.
        for word in ["run-now", "show-output", "workflows", "catch-up"] {
            assert!(ran.stdout.contains(word), "{shell} lacks {word}");
        }
        // Nothing from the data directory is touched.
        assert!(!env.data_dir().exists(), "{shell}");
    }
    env.loops(["completions", "tcsh"])
        .code(2)
        .stderr_has("invalid value 'tcsh'")
        .run();
}

#[test]
fn man_writes_a_page_per_command() {
    let env = TestEnv::new();
    let dir = env.home().join("man").join("man1");
    let ran = env.loops(["man", "--dir", dir.to_str().unwrap()]).run();
    let pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        ran.stdout,
        format!("wrote {} man pages to {}\n", pages.len(), dir.display())
    );
    for page in [
        "loops.1",
        "loops-create.1",
        "loops-create-command.1",
        "loops-workflows-run.1",
        "loops-daemon-install.1",
        "loops-completions.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "{page} in {pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("help")), "{pages:?}");
    let page = std::fs::read_to_string(dir.join("loops-create-command.1")).unwrap();
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH"),
        "{page}"
    );
    assert!(page.contains("loops\\-create\\-command"), "{page}");
    assert!(page.contains("\\-\\-every"), "{page}");

    // A file where the directory should be is an error, not a panic.
    let file = env.home().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    env.loops(["man", "--dir", file.to_str().unwrap()])
        .code(1)
        .stderr_has("is not a directory")
        .run();
}
