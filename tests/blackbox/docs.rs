//! Shell completions and man pages (issue 16 §7), generated from the parser
//! itself.

use loops_tests::TestEnv;

#[test]
fn completions_print_the_dynamic_registration_for_every_shell() {
    let env = TestEnv::new();
    for (shell, marker) in [
        ("bash", "-F _clap_complete_loops loops"),
        ("zsh", "compdef _clap_dynamic_completer_loops loops"),
        ("fish", "complete --keep-order --exclusive --command loops"),
        ("elvish", "edit:completion:arg-completer[loops]"),
        (
            "powershell",
            "Register-ArgumentCompleter -Native -CommandName loops",
        ),
    ] {
        let ran = env.loops(["completions", shell]).run();
        assert!(ran.stdout.contains(marker), "{shell}: {}", ran.stdout);
        // The script asks `loops` itself, with COMPLETE set.
        assert!(ran.stdout.contains("COMPLETE"), "{shell}: {}", ran.stdout);
        // It is the script `COMPLETE=<shell> loops` prints, zsh's with the
        // line that completes the first Tab when autoloaded from $fpath.
        let registered = env
            .loops(Vec::<&str>::new())
            .env("COMPLETE", Some(shell))
            .run();
        let expected = registered
            .stdout
            .replace(&loops_tests::loops_bin().display().to_string(), "loops");
        if shell == "zsh" {
            assert!(
                ran.stdout.starts_with(expected.trim_end()),
                "{}",
                ran.stdout
            );
            assert!(ran.stdout.contains("_clap_dynamic_completer_loops \"$@\""));
        } else {
            assert_eq!(ran.stdout.trim_end(), expected.trim_end(), "{shell}");
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
fn static_completions_cover_every_shell_and_the_subcommands() {
    let env = TestEnv::new();
    for (shell, marker) in [
        ("bash", "complete -F _loops"),
        ("zsh", "#compdef loops"),
        ("fish", "complete -c loops"),
        ("elvish", "edit:completion:arg-completer[loops]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let ran = env.loops(["completions", shell, "--static"]).run();
        assert!(
            ran.stdout.contains(marker),
            "{shell}: {}",
            &ran.stdout[..200]
        );
        // Subcommands and their flags are in the script.
        for word in ["run-now", "show-output", "workflows", "catch-up"] {
            assert!(ran.stdout.contains(word), "{shell} lacks {word}");
        }
        assert!(!env.data_dir().exists(), "{shell}");
    }
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
