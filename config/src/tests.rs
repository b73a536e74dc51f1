use super::*;
use std::collections::HashSet;

fn os(s: &str) -> Option<&OsStr> {
    Some(OsStr::new(s))
}

#[test]
fn switches_take_exactly_1_and_0() {
    for v in VARS
        .iter()
        .filter(|v| matches!(v.kind, Kind::Switch { .. }))
    {
        let Kind::Switch { default } = v.kind else {
            unreachable!()
        };
        assert_eq!(v.parse_switch(os("1")), Ok(true), "{}", v.name);
        assert_eq!(v.parse_switch(os("0")), Ok(false), "{}", v.name);
        assert_eq!(v.parse_switch(None), Ok(default), "{}", v.name);
        assert_eq!(v.parse_switch(os("")), Ok(default), "{}", v.name);
        assert_eq!(v.parse(None), Ok(Value::Switch(default)), "{}", v.name);
        for bad in [
            "true", "false", "yes", "no", "on", "off", "TRUE", " 1", "1 ", "01", "2", "-1", "",
        ] {
            if bad.is_empty() {
                continue;
            }
            let e = v.parse_switch(os(bad)).unwrap_err();
            assert_eq!(e.var, v.name);
            assert_eq!(e.value, bad);
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{}={bad:?}", v.name)), "{msg}");
            assert!(msg.contains("use 1 (on) or 0 (off)"), "{msg}");
        }
    }
}

#[test]
fn choices_take_exactly_their_words() {
    let sync = &CUDA_ARRAY_INTERFACE_SYNC;
    assert_eq!(sync.parse_choice(None), Ok(None));
    assert_eq!(sync.parse_choice(os("")), Ok(None));
    for w in ["1", "0", "event"] {
        assert_eq!(sync.parse_choice(os(w)), Ok(Some(w)));
        assert_eq!(sync.parse(os(w)), Ok(Value::Choice(w)));
    }
    for bad in ["Event", "events", " 1", "true", "off", "2", "yes"] {
        let e = sync.parse_choice(os(bad)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC={bad:?} is not understood; use 1 (host \
                 sync), 0 (off) or event (event waits)"
            )
        );
    }
    let only = BUNDLE_ONLY.parse_choice(os("rust")).unwrap_err();
    assert!(
        only.to_string().ends_with("use python (the Python part)"),
        "{only}"
    );
}

#[test]
fn lists_split_on_commas_and_empty_is_none() {
    let v = &CUBIN_ARCHS;
    assert_eq!(v.parse_list(None), Ok(None));
    assert_eq!(v.parse_list(os("")), Ok(Some(vec![])));
    assert_eq!(v.parse(os("")), Ok(Value::Items(vec![])));
    assert_eq!(
        v.parse_list(os(" sm_90 ,sm_80,, sm_100a ")),
        Ok(Some(vec!["sm_90".into(), "sm_80".into(), "sm_100a".into()]))
    );
    assert_eq!(v.parse_list(os(",")), Ok(Some(vec![])));
}

#[test]
fn words_split_on_blanks() {
    let v = &PYSAN_TOOLS;
    assert_eq!(v.parse_words(None), Ok(None));
    assert_eq!(v.parse_words(os("")), Ok(None));
    assert_eq!(
        v.parse_words(os(" memcheck\tracecheck  ")),
        Ok(Some(vec!["memcheck".into(), "racecheck".into()]))
    );
}

#[test]
fn counts_are_decimal_digits() {
    let v = &FUZZ_CASES;
    assert_eq!(v.parse_count(None), Ok(None));
    assert_eq!(v.parse_count(os("")), Ok(None));
    assert_eq!(v.parse_count(os("0")), Ok(Some(0)));
    assert_eq!(v.parse_count(os("20000")), Ok(Some(20000)));
    assert_eq!(
        v.parse_count(os("18446744073709551615")),
        Ok(Some(u64::MAX))
    );
    for bad in [
        "-1",
        "+5",
        "1e6",
        "0x10",
        " 5",
        "5 ",
        "1_000",
        "ten",
        "18446744073709551616",
    ] {
        let e = v.parse_count(os(bad)).unwrap_err();
        assert_eq!(e.var, "FERROCUDA_FUZZ_CASES");
        assert!(e.to_string().contains("decimal integer"), "{e}");
    }
}

#[test]
fn paths_and_text_are_used_as_given() {
    assert_eq!(HOME.parse(None), Ok(Value::Unset));
    assert_eq!(HOME.parse(os("")), Ok(Value::Unset));
    assert_eq!(
        HOME.parse(os(" /a b/c ")),
        Ok(Value::Path(PathBuf::from(" /a b/c ")))
    );
    assert_eq!(DEVICE_CHILD.parse(os("")), Ok(Value::Unset));
    assert_eq!(DEVICE_CHILD.parse(os("x y")), Ok(Value::Text("x y".into())));
}

#[cfg(unix)]
#[test]
fn text_that_is_not_utf8_is_an_error_naming_the_variable() {
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"sm_90\xff");
    let e = CUBIN_ARCHS.parse_list(Some(bad)).unwrap_err();
    assert_eq!(e.var, "FERROCUDA_CUBIN_ARCHS");
    assert!(e.to_string().contains("UTF-8"), "{e}");
    assert!(FUZZ_CASES.parse_count(Some(bad)).is_err());
    assert!(CUDA_ARRAY_INTERFACE_SYNC.parse_choice(Some(bad)).is_err());
    // A path is the one kind that takes any bytes.
    assert_eq!(HOME.parse(Some(bad)), Ok(Value::Path(PathBuf::from(bad))));
}

#[test]
fn the_table_is_well_formed() {
    let mut names = HashSet::new();
    for v in VARS {
        assert!(names.insert(v.name), "{} twice", v.name);
        assert!(v.name.starts_with("FERROCUDA_"), "{}", v.name);
        let rest = &v.name["FERROCUDA_".len()..];
        assert!(
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "{}",
            v.name
        );
        assert_eq!(lookup(v.name), Some(*v));
        for text in [v.read_by, v.values, v.default] {
            assert!(!text.trim().is_empty(), "{}: an empty column", v.name);
            assert!(!text.contains('|') && !text.contains('\n'), "{}", v.name);
        }
        if let Kind::Choice(words) = v.kind {
            assert!(!words.is_empty(), "{}", v.name);
        }
    }
    assert_eq!(lookup("FERROCUDA_NOT_A_VARIABLE"), None);
    // The library's variables come first (the README's first table).
    let first_tool = VARS.iter().position(|v| v.scope == Scope::Tools).unwrap();
    assert!(VARS[first_tool..].iter().all(|v| v.scope == Scope::Tools));
}

#[test]
fn the_readme_section_lists_every_variable_once() {
    let s = readme_section();
    for v in VARS {
        assert_eq!(
            s.matches(&format!("| `{}` |", v.name)).count(),
            1,
            "{}",
            v.name
        );
    }
    assert_eq!(
        s.lines().filter(|l| l.starts_with("| `FERROCUDA_")).count(),
        VARS.len()
    );
}
