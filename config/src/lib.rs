//! ferrocuda's environment variables, each named, parsed and documented once.
//!
//! [`VARS`] is the table of every `FERROCUDA_*` variable: its name, the [`Kind`] of value it
//! takes, who reads it ([`Scope`] and a phrase), what its values do and its default. The
//! readers (the host runtime, the builder, the Python extension, the pure-Python package
//! through the extension) call the typed accessors of its entries ([`Var::switch`],
//! [`Var::path`], …), so that every variable of a kind is spelled the same way; the
//! README's "Environment variables" section is [`readme_section`] (a test keeps the two
//! equal).
//!
//! The spelling rules ([`RULES`]):
//!
//! * a switch ([`Kind::Switch`]) is `1` (on) or `0` (off);
//! * a choice ([`Kind::Choice`]) is one of its words, exactly;
//! * a list ([`Kind::List`]) is comma-separated (blanks around items ignored, empty items
//!   dropped), [`Kind::Words`] blank-separated;
//! * a count ([`Kind::Count`]) is a decimal integer;
//! * a path ([`Kind::Path`]) or text ([`Kind::Text`]) is used as given;
//! * an empty value counts as unset — except for a list, where it is the empty list;
//! * anything else is an [`Error`] naming the variable, the value and what it takes: a typo
//!   must not silently change what ferrocuda does.
//!
//! ```
//! use ferrocuda_config::{Kind, FAST_PATHS};
//! assert_eq!(FAST_PATHS.name, "FERROCUDA_FAST_PATHS");
//! assert_eq!(FAST_PATHS.kind, Kind::Switch { default: true });
//! assert_eq!(FAST_PATHS.parse_switch(Some("0".as_ref())), Ok(false));
//! assert_eq!(FAST_PATHS.parse_switch(None), Ok(true));
//! let e = FAST_PATHS.parse_switch(Some("off".as_ref())).unwrap_err();
//! assert!(e.to_string().contains("FERROCUDA_FAST_PATHS"));
//! ```
#![warn(missing_docs)]

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

/// What kind of value a variable takes (see the [crate documentation](crate) for spellings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `1` (on) or `0` (off); `default` when unset.
    Switch {
        /// The value when the variable is unset or empty.
        default: bool,
    },
    /// One of `words` (exactly), each with what it means.
    Choice(&'static [(&'static str, &'static str)]),
    /// A file or directory, used as given.
    Path,
    /// Comma-separated items (blanks around them ignored, empty ones dropped); empty: none.
    List,
    /// Blank-separated items.
    Words,
    /// A non-negative decimal integer.
    Count,
    /// Free text, used as given.
    Text,
}

impl Kind {
    /// The kind's name in the documentation: `switch`, `choice`, `path`, `list`, `words`,
    /// `count` or `text`.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Switch { .. } => "switch",
            Kind::Choice(_) => "choice",
            Kind::Path => "path",
            Kind::List => "list",
            Kind::Words => "words",
            Kind::Count => "count",
            Kind::Text => "text",
        }
    }
}

/// Who reads a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The library and the builder: what a user's program reads.
    Library,
    /// The test suites, benchmarks and scripts of the repository.
    Tools,
}

/// One environment variable: an entry of [`VARS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    /// Its name, `FERROCUDA_…`.
    pub name: &'static str,
    /// The kind of value it takes.
    pub kind: Kind,
    /// Who reads it.
    pub scope: Scope,
    /// Which part reads it (a phrase, for the documentation).
    pub read_by: &'static str,
    /// What its values do (Markdown).
    pub values: &'static str,
    /// What happens when it is unset (Markdown).
    pub default: &'static str,
}

/// A value a variable does not take: names the variable, the value and what it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The variable.
    pub var: &'static str,
    /// The value it holds (lossily decoded).
    pub value: String,
    /// What it takes, as a phrase (`use 1 (on) or 0 (off)`).
    pub expected: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} is not understood; {}",
            self.var, self.value, self.expected
        )
    }
}

impl std::error::Error for Error {}

/// A parsed value of any kind ([`Var::value`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A variable other than a switch is unset (or empty).
    Unset,
    /// A switch (its default when unset).
    Switch(bool),
    /// A choice's word.
    Choice(&'static str),
    /// A path.
    Path(PathBuf),
    /// A list's or words' items.
    Items(Vec<String>),
    /// A count.
    Count(u64),
    /// Text.
    Text(String),
}

impl Var {
    /// The variable's value in the environment, `None` when unset or empty.
    pub fn raw(&self) -> Option<OsString> {
        std::env::var_os(self.name).filter(|v| !v.is_empty())
    }

    fn error(&self, value: &OsStr, expected: impl Into<String>) -> Error {
        Error {
            var: self.name,
            value: value.to_string_lossy().into_owned(),
            expected: expected.into(),
        }
    }

    fn text_of<'a>(&self, value: &'a OsStr) -> Result<&'a str, Error> {
        value
            .to_str()
            .ok_or_else(|| self.error(value, "the value is not valid UTF-8"))
    }

    /// A switch's value: [`parse_switch`](Self::parse_switch) of the environment.
    ///
    /// # Errors
    ///
    /// A value other than `1`, `0` or empty.
    pub fn switch(&self) -> Result<bool, Error> {
        self.parse_switch(std::env::var_os(self.name).as_deref())
    }

    /// Parses `value` (`None`: unset) as a switch: `1` on, `0` off, unset or empty the
    /// default of [`Kind::Switch`] (off for a variable of another kind).
    ///
    /// # Errors
    ///
    /// A value other than `1`, `0` or empty.
    pub fn parse_switch(&self, value: Option<&OsStr>) -> Result<bool, Error> {
        let default = matches!(self.kind, Kind::Switch { default: true });
        match value.filter(|v| !v.is_empty()) {
            None => Ok(default),
            Some(v) if v == "1" => Ok(true),
            Some(v) if v == "0" => Ok(false),
            Some(v) => Err(self.error(v, "use 1 (on) or 0 (off)")),
        }
    }

    /// A choice's word: [`parse_choice`](Self::parse_choice) of the environment.
    ///
    /// # Errors
    ///
    /// A value other than one of the words or empty.
    pub fn choice(&self) -> Result<Option<&'static str>, Error> {
        self.parse_choice(std::env::var_os(self.name).as_deref())
    }

    /// Parses `value` (`None`: unset) as one of the words of [`Kind::Choice`] (exactly, case
    /// included); `None` when unset or empty.
    ///
    /// # Errors
    ///
    /// A value other than one of the words or empty.
    pub fn parse_choice(&self, value: Option<&OsStr>) -> Result<Option<&'static str>, Error> {
        let words: &[(&str, &str)] = match self.kind {
            Kind::Choice(w) => w,
            _ => &[],
        };
        let Some(v) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        if let Some((w, _)) = words.iter().find(|(w, _)| v == *w) {
            return Ok(Some(w));
        }
        let list: Vec<String> = words.iter().map(|(w, m)| format!("{w} ({m})")).collect();
        let expected = match list.split_last() {
            Some((last, rest)) if !rest.is_empty() => {
                format!("use {} or {last}", rest.join(", "))
            }
            Some((only, _)) => format!("use {only}"),
            None => "no value is accepted".into(),
        };
        Err(self.error(v, expected))
    }

    /// A path: the value when set and not empty.
    pub fn path(&self) -> Option<PathBuf> {
        self.raw().map(PathBuf::from)
    }

    /// A list's items: [`parse_list`](Self::parse_list) of the environment.
    ///
    /// # Errors
    ///
    /// A value that is not valid UTF-8.
    pub fn list(&self) -> Result<Option<Vec<String>>, Error> {
        self.parse_list(std::env::var_os(self.name).as_deref())
    }

    /// Parses `value` (`None`: unset) as a comma-separated list: blanks around items
    /// ignored, empty items dropped; an empty value is the empty list.
    ///
    /// # Errors
    ///
    /// A value that is not valid UTF-8.
    pub fn parse_list(&self, value: Option<&OsStr>) -> Result<Option<Vec<String>>, Error> {
        let Some(v) = value else { return Ok(None) };
        Ok(Some(
            self.text_of(v)?
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        ))
    }

    /// Parses `value` (`None`: unset) as blank-separated words; `None` when unset or empty.
    ///
    /// # Errors
    ///
    /// A value that is not valid UTF-8.
    pub fn parse_words(&self, value: Option<&OsStr>) -> Result<Option<Vec<String>>, Error> {
        let Some(v) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        Ok(Some(
            self.text_of(v)?
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        ))
    }

    /// A count: [`parse_count`](Self::parse_count) of the environment.
    ///
    /// # Errors
    ///
    /// A value that is not a decimal integer (nor empty).
    pub fn count(&self) -> Result<Option<u64>, Error> {
        self.parse_count(std::env::var_os(self.name).as_deref())
    }

    /// Parses `value` (`None`: unset) as a non-negative decimal integer (digits only); `None`
    /// when unset or empty.
    ///
    /// # Errors
    ///
    /// A value that is not a decimal integer (nor empty), or one over `u64::MAX`.
    pub fn parse_count(&self, value: Option<&OsStr>) -> Result<Option<u64>, Error> {
        let Some(v) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let bad = || self.error(v, "use a non-negative decimal integer");
        let s = v.to_str().ok_or_else(bad)?;
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map(Some).map_err(|_| bad())
    }

    /// Text: the value when set and not empty.
    ///
    /// # Errors
    ///
    /// A value that is not valid UTF-8.
    pub fn text(&self) -> Result<Option<String>, Error> {
        match self.raw() {
            None => Ok(None),
            Some(v) => self.text_of(&v).map(|s| Some(s.to_owned())),
        }
    }

    /// The value in the environment parsed by the variable's [`Kind`].
    ///
    /// # Errors
    ///
    /// As the accessor of the kind.
    pub fn value(&self) -> Result<Value, Error> {
        self.parse(std::env::var_os(self.name).as_deref())
    }

    /// `value` (`None`: unset) parsed by the variable's [`Kind`].
    ///
    /// # Errors
    ///
    /// As the parser of the kind.
    pub fn parse(&self, value: Option<&OsStr>) -> Result<Value, Error> {
        Ok(match self.kind {
            Kind::Switch { .. } => Value::Switch(self.parse_switch(value)?),
            Kind::Choice(_) => self
                .parse_choice(value)?
                .map_or(Value::Unset, Value::Choice),
            Kind::Path => value
                .filter(|v| !v.is_empty())
                .map_or(Value::Unset, |v| Value::Path(PathBuf::from(v))),
            Kind::List => self.parse_list(value)?.map_or(Value::Unset, Value::Items),
            Kind::Words => self.parse_words(value)?.map_or(Value::Unset, Value::Items),
            Kind::Count => self.parse_count(value)?.map_or(Value::Unset, Value::Count),
            Kind::Text => match value.filter(|v| !v.is_empty()) {
                None => Value::Unset,
                Some(v) => Value::Text(self.text_of(v)?.to_owned()),
            },
        })
    }
}

/// The entry of [`VARS`] named `name`.
pub fn lookup(name: &str) -> Option<&'static Var> {
    VARS.iter().copied().find(|v| v.name == name)
}

macro_rules! vars {
    ($(
        $(#[$doc:meta])*
        $id:ident = $name:literal, $kind:expr, $scope:ident, $read_by:literal, $values:literal,
        $default:literal;
    )*) => {
        $(
            $(#[$doc])*
            pub const $id: Var = Var {
                name: $name,
                kind: $kind,
                scope: Scope::$scope,
                read_by: $read_by,
                values: $values,
                default: $default,
            };
        )*
        /// Every variable, in the order of the README's tables.
        pub static VARS: &[&Var] = &[$(&$id),*];
    };
}

vars! {
    // ---- the library and the builder ----
    /// How a launch is ordered against foreign producer streams (the host's `SyncMode`).
    CUDA_ARRAY_INTERFACE_SYNC = "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC",
        Kind::Choice(&[("1", "host sync"), ("0", "off"), ("event", "event waits")]),
        Library, "launches (Rust and Python)",
        "`1`: host-synchronize foreign producer streams (Numba's rule); `event`: order them \
         with events; `0`: no ordering",
        "`1`";
    /// The Python launchers' fast paths for CuPy arrays and torch tensors.
    FAST_PATHS = "FERROCUDA_FAST_PATHS", Kind::Switch { default: true },
        Library, "Python launches",
        "`0`: read CuPy arrays and torch tensors through their interface, not the fast paths",
        "`1`";
    /// torch's DLPack exchange API for reading tensors.
    TORCH_EXCHANGE = "FERROCUDA_TORCH_EXCHANGE", Kind::Switch { default: true },
        Library, "Python launches",
        "`0`: read torch tensors by attributes, not torch's DLPack exchange API",
        "`1` (used where torch has it)";
    /// ferrocuda's own directory.
    HOME = "FERROCUDA_HOME", Kind::Path,
        Library, "builds from Python, inline kernels, autotuning, the nvcc wheel download",
        "a directory",
        "`$XDG_CACHE_HOME/ferrocuda`, else `~/.cache/ferrocuda`";
    /// The inline kernel cache.
    INLINE_CACHE = "FERROCUDA_INLINE_CACHE", Kind::Path,
        Library, "`ferrocuda.inline`", "a directory", "`$FERROCUDA_HOME/inline`";
    /// The autotuners' results.
    AUTOTUNE_CACHE = "FERROCUDA_AUTOTUNE_CACHE", Kind::Path,
        Library, "`ferrocuda.autotune`", "a directory", "`$FERROCUDA_HOME/autotune`";
    /// The target directory of the builder's child builds.
    PTX_TARGET_DIR = "FERROCUDA_PTX_TARGET_DIR", Kind::Path,
        Library, "the builder (build scripts)",
        "the target directory of the child builds (NVPTX `core`, the device crate, the kernel \
         crates), for builds that do not name one: cargo builds with different target \
         directories (rust-analyzer's, a wheel's) that set it build each kernel crate once per \
         set of flags, taking turns (`scripts/test.sh`: `target/ferrocuda-ptx`)",
        "`<cargo's target directory>/ferrocuda-ptx`";
    /// The cargo the builder runs.
    CARGO = "FERROCUDA_CARGO", Kind::Path,
        Library, "the builder", "the cargo to run", "`cargo` on `PATH`";
    /// libdevice.
    LIBDEVICE = "FERROCUDA_LIBDEVICE", Kind::Path,
        Library, "the builder", "the path of `libdevice.10.bc` (final when set)",
        "searched: `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`, a Python's nvcc wheel, the \
         download";
    /// ptxas.
    PTXAS = "FERROCUDA_PTXAS", Kind::Path,
        Library, "the builder", "the path of `ptxas` (final when set)",
        "searched as libdevice, then `PATH`";
    /// ptxas's results, kept by PTX contents.
    PTXAS_CACHE = "FERROCUDA_PTXAS_CACHE", Kind::Path,
        Library, "the builder, its checks and the SASS tests",
        "a directory keeping each ptxas run's cubin and report by the PTX's exact bytes, the \
         architecture and the ptxas (`scripts/test.sh`: `target/ptxas-cache`; 256 entries kept)",
        "none: ptxas runs every time";
    /// nvdisasm.
    NVDISASM = "FERROCUDA_NVDISASM", Kind::Path,
        Library, "the builder's SASS checks", "the path of `nvdisasm` (final when set)",
        "searched as ptxas";
    /// The architectures the builder assembles cubins for.
    CUBIN_ARCHS = "FERROCUDA_CUBIN_ARCHS", Kind::List,
        Library, "the builder",
        "real architectures to assemble cubins for (`sm_90,sm_100`); empty for none",
        "`sm_80,sm_90` (those not older than the crate's)";
    /// Whether the builder may download the nvcc wheel.
    OFFLINE = "FERROCUDA_OFFLINE", Kind::Switch { default: false },
        Library, "the builder",
        "`1`: never download the nvcc wheel (also `CARGO_NET_OFFLINE=true`)",
        "`0`: downloads when nothing provides libdevice";

    // ---- tests, benchmarks and scripts ----
    /// The random seed of the test suites.
    TEST_SEED = "FERROCUDA_TEST_SEED", Kind::Count,
        Tools, "Rust and Python GPU tests", "the random seed (printed by each test)",
        "a fresh one";
    /// Examples per Hypothesis property.
    HYPOTHESIS_EXAMPLES = "FERROCUDA_HYPOTHESIS_EXAMPLES", Kind::Count,
        Tools, "`test_hypothesis_interface.py`", "examples per property", "`1000`";
    /// Cases of the interface fuzz test.
    FUZZ_CASES = "FERROCUDA_FUZZ_CASES", Kind::Count,
        Tools, "`host/tests/fuzz_cai.rs`", "cases of the interface fuzz test", "`20000`";
    /// Samples per device math function.
    MATH_SAMPLES = "FERROCUDA_MATH_SAMPLES", Kind::Count,
        Tools, "`test_gpu_device_math.py`", "random samples per math function", "`1500`";
    /// The TMA modes the device tests run.
    TMA_MODES = "FERROCUDA_TMA_MODES", Kind::List,
        Tools, "`tests/device_gpu/tma.rs`",
        "which TMA modes run (bit 0: prefetch the descriptor, bit 1: store)", "`0,1,2,3`";
    /// The device-primitive test kernels.
    DEVICE_KERNELS = "FERROCUDA_DEVICE_KERNELS", Kind::Path,
        Tools, "the device-primitive GPU tests", "the test kernels' manifest",
        "the bundled one";
    /// A kernel crate made by `ferrocuda new`.
    OWN_CRATE = "FERROCUDA_OWN_CRATE", Kind::Path,
        Tools, "the own-crate GPU tests", "a crate made by `ferrocuda new`", "one is made";
    /// The sdist install test.
    TEST_INSTALL = "FERROCUDA_TEST_INSTALL", Kind::Switch { default: false },
        Tools, "`test_install.py`", "`1`: install the sdist in a fresh venv (minutes)", "`0`";
    /// Set by a device test for the child process it starts.
    DEVICE_CHILD = "FERROCUDA_DEVICE_CHILD", Kind::Text,
        Tools, "`tests/device_gpu`", "set by a test for the child it starts: the scenario",
        "the parent";
    /// Set by a GPU test for the child process it starts.
    FAULT_CHILD = "FERROCUDA_FAULT_CHILD", Kind::Switch { default: false },
        Tools, "`tests/gpu.rs`", "set by a test for the child it starts", "`0`: the parent";
    /// Set by a GPU test for the child process it starts.
    FIRST_LAUNCH_CHILD = "FERROCUDA_FIRST_LAUNCH_CHILD", Kind::Switch { default: false },
        Tools, "`tests/gpu/cubins.rs`", "set by a test for the child it starts",
        "`0`: the parent";
    /// The ptx-check binary of `scripts/check_ptx.py`.
    PTX_CHECK = "FERROCUDA_PTX_CHECK", Kind::Path,
        Tools, "`scripts/check_ptx.py`", "the `ferrocuda-ptx-check` binary to run",
        "built with cargo";
    /// Skips the Python examples of `scripts/run.sh`.
    SKIP_PYTHON = "FERROCUDA_SKIP_PYTHON", Kind::Switch { default: false },
        Tools, "`scripts/run.sh`", "`1`: skip the Python examples", "`0`";
    /// The part of the GPU bundle to make.
    BUNDLE_ONLY = "FERROCUDA_BUNDLE_ONLY", Kind::Choice(&[("python", "the Python part")]),
        Tools, "`scripts/gpu-bundle.sh`", "`python`: the Python part alone", "everything";
    /// Whether the GPU bundle carries the Dask/MPI wheels.
    BUNDLE_SCALE = "FERROCUDA_BUNDLE_SCALE", Kind::Switch { default: true },
        Tools, "`scripts/gpu-bundle.sh`", "`0`: without the Dask and MPI wheels", "`1`";
    /// Whether the GPU bundle carries the profiling build.
    BUNDLE_PROFILING = "FERROCUDA_BUNDLE_PROFILING", Kind::Switch { default: true },
        Tools, "`scripts/gpu-bundle.sh`", "`0`: without the profiling build", "`1`";
    /// Whether the GPU bundle carries the earlier build.
    BUNDLE_BEFORE = "FERROCUDA_BUNDLE_BEFORE", Kind::Switch { default: true },
        Tools, "`scripts/gpu-bundle.sh`", "`0`: without the earlier build (`run.sh compare`)",
        "`1`";
    /// Whether the GPU bundle carries Linux perf.
    BUNDLE_PERF = "FERROCUDA_BUNDLE_PERF", Kind::Switch { default: false },
        Tools, "`scripts/gpu-bundle.sh`", "`1`: with Linux perf (`run.sh perf`)", "`0`";
    /// The Python test files of `run.sh pyfiles`.
    PYFILES = "FERROCUDA_PYFILES", Kind::Words,
        Tools, "`.gpu/run.sh pyfiles`", "the Python test files (or pytest node ids) to run",
        "none";
    /// The time limit of each Rust test binary.
    BIN_TIMEOUT_S = "FERROCUDA_BIN_TIMEOUT_S", Kind::Count,
        Tools, "`.gpu/run.sh`", "seconds per Rust test binary", "`300`";
    /// The time limit of each compute-sanitizer tool.
    SANITIZER_S = "FERROCUDA_SANITIZER_S", Kind::Count,
        Tools, "`.gpu/run.sh`", "seconds per compute-sanitizer tool (Python tests)", "`540`";
    /// Skips the soak test under memcheck.
    SKIP_SOAK = "FERROCUDA_SKIP_SOAK", Kind::Switch { default: false },
        Tools, "`.gpu/run.sh`", "`1`: skip the soak test under every sanitizer tool", "`0`";
    /// The compute-sanitizer tools of the Python run.
    PYSAN_TOOLS = "FERROCUDA_PYSAN_TOOLS", Kind::Words,
        Tools, "`.gpu/run.sh`", "compute-sanitizer tools for the Python tests",
        "`memcheck racecheck synccheck`";
    /// The Python test files under compute-sanitizer.
    PYSAN_PATHS = "FERROCUDA_PYSAN_PATHS", Kind::Words,
        Tools, "`.gpu/run.sh`", "Python test files to run under compute-sanitizer",
        "all of them";
    /// The Rust gallery tests under compute-sanitizer (`gallery-sanitizer`).
    GALLERY_FILTER = "FERROCUDA_GALLERY_FILTER", Kind::Text,
        Tools, "`.gpu/run.sh`", "test-name filter of the Rust gallery tests under \
         compute-sanitizer (`gallery-sanitizer`)", "every test";
    /// The time limit of the scale benchmark.
    SCALE_BENCH_S = "FERROCUDA_SCALE_BENCH_S", Kind::Count,
        Tools, "`.gpu/run.sh`", "seconds for the scale benchmark", "`150` (`560` for \
         `scalebench`)";
    /// The time limit of the scale tests.
    SCALE_TIMEOUT_S = "FERROCUDA_SCALE_TIMEOUT_S", Kind::Count,
        Tools, "`.gpu/run.sh`", "seconds for the scale tests", "`420`";
    /// Uses the system's MPI.
    SYSTEM_MPI = "FERROCUDA_SYSTEM_MPI", Kind::Switch { default: false },
        Tools, "`.gpu/run.sh`", "`1`: the system's MPI, not the bundled one", "`0`";
    /// The MPI launcher.
    MPIEXEC = "FERROCUDA_MPIEXEC", Kind::Path,
        Tools, "the scale tests", "the MPI launcher", "`mpiexec` on `PATH`";
    /// Set when the tests run under compute-sanitizer.
    SANITIZER = "FERROCUDA_SANITIZER", Kind::Switch { default: false },
        Tools, "the scale tests", "`1`: running under compute-sanitizer (smaller cases; set \
         by `.gpu/run.sh`)", "`0`";
    /// A NumPy for Numba.
    NUMBA_SITE = "FERROCUDA_NUMBA_SITE", Kind::Path,
        Tools, "the benchmarks", "a `site-packages` with a NumPy that Numba accepts",
        "Numba rows skipped";
}

/// The spelling rules, as the README states them.
pub const RULES: &str = "\
Spelling, the same for every variable of a kind: a **switch** is `1` (on) or `0` (off); a
**choice** is one of the words listed, exactly; a **list** is comma-separated (blanks around
items ignored); **words** are blank-separated; a **count** is a decimal integer; a **path** or
**text** is used as given. An empty value counts as unset, except for a list, where it is the
empty list. Any other value is an error that names the variable and the values it takes (a
launch's `ValueError`, a build error): a typo must not silently change what ferrocuda does.
Python code reads them through `ferrocuda._config`, Rust code through the `ferrocuda-config`
crate, whose table (`config/src/lib.rs`) is the one source of this section.";

/// The README's "Environment variables" section (the text between its heading and the next):
/// [`RULES`] and one table per [`Scope`], generated from [`VARS`].
pub fn readme_section() -> String {
    let mut out = String::from(
        "\nEvery `FERROCUDA_*` variable, in one place. None is needed: each has the default \
         shown.\n\n",
    );
    out.push_str(RULES);
    out.push_str("\n\nWhat the library and the builder read:\n\n");
    table(&mut out, Scope::Library);
    out.push_str(
        "\nWhat the tests, benchmarks and scripts read (each documented where it is read):\n\n",
    );
    table(&mut out, Scope::Tools);
    out.push('\n');
    out
}

fn table(out: &mut String, scope: Scope) {
    out.push_str("| variable | kind | read by | values | default |\n");
    out.push_str("| --- | --- | --- | --- | --- |\n");
    for v in VARS.iter().filter(|v| v.scope == scope) {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            v.name,
            v.kind.name(),
            v.read_by,
            v.values,
            v.default
        ));
    }
}

#[cfg(test)]
mod tests;
