//! What the rules share: the [`Rule`]s, their [`Severity`] and [`Finding`]s, and the two
//! questions several rules ask of a function (its direct calls, whether an operand names a
//! symbol). Below every rule's module: they use it, it uses none of them but [`cfg`]'s
//! call-target parser.

use super::cfg;
use super::parse::{self, PtxFunction};
use std::fmt;

/// Which rule a finding breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// An unresolved `.extern` declaration or a call to one.
    Extern,
    /// A kernel that reaches panic machinery through its calls.
    Panic,
    /// A byte array holding a panic message or a source path.
    PanicText,
    /// A function using `.local` memory.
    Local,
    /// A barrier that not every thread of a block may reach.
    Barrier,
    /// An mbarrier wait in a kernel with no arrive on any mbarrier.
    MBarrier,
    /// A `cp.async` group wait in a kernel that commits no group.
    CpAsync,
    /// A non-zero (or unknown) stack frame, from ptxas.
    Stack,
    /// Register spills, from ptxas.
    Spill,
    /// ptxas failed, or did not report an entry.
    Ptxas,
    /// The manifest and the PTX disagree.
    Manifest,
    /// The module defines no `.entry`.
    Entry,
    /// An instruction the module's target architecture does not have.
    Arch,
    /// Shared memory over the device's limits.
    Shared,
    /// A `wgmma.mma_async` without its fence, commit or wait (or serialized by ptxas).
    Wgmma,
}

impl Rule {
    /// The rule's short name (`extern`, `panic-text`, …).
    pub fn name(self) -> &'static str {
        match self {
            Rule::Extern => "extern",
            Rule::Panic => "panic",
            Rule::PanicText => "panic-text",
            Rule::Local => "local",
            Rule::Barrier => "barrier",
            Rule::MBarrier => "mbarrier",
            Rule::CpAsync => "cp-async",
            Rule::Stack => "stack",
            Rule::Spill => "spill",
            Rule::Ptxas => "ptxas",
            Rule::Manifest => "manifest",
            Rule::Entry => "entry",
            Rule::Arch => "arch",
            Rule::Shared => "shared",
            Rule::Wgmma => "wgmma",
        }
    }
}

/// Whether a finding fails a [`PtxBuilder`](crate::PtxBuilder) build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Reported (`cargo:warning=`), the build goes on.
    Warning,
    /// The build fails.
    Error,
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The function (entry or `.func`) concerned; `None` for the module.
    pub function: Option<String>,
    /// The rule.
    pub rule: Rule,
    /// For a build.
    pub severity: Severity,
    /// What is wrong and, where known, what to do.
    pub message: String,
    /// The architecture of a ptxas finding.
    pub arch: Option<String>,
    /// The PTX line (1-based) of the instruction concerned, where there is one.
    pub line: Option<usize>,
    /// Where in the Rust sources (`src/lib.rs:17`), when a build located it (see
    /// [`PtxBuilder`](crate::PtxBuilder): a build with errors or warnings about a kernel finds
    /// the line in the kernel crate that the instruction — or else the kernel — comes from).
    pub source: Option<String>,
}

impl Finding {
    pub(crate) fn new(
        function: Option<&str>,
        rule: Rule,
        severity: Severity,
        message: String,
    ) -> Finding {
        Finding {
            function: function.map(str::to_string),
            rule,
            severity,
            message,
            arch: None,
            line: None,
            source: None,
        }
    }

    /// The same, about the instruction at PTX line `line`.
    pub(crate) fn at(mut self, line: usize) -> Finding {
        self.line = Some(line);
        self
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = self.function.as_deref().unwrap_or("<module>");
        match &self.arch {
            Some(a) => write!(f, "{who} [{a}]: {}: ", self.rule.name())?,
            None => write!(f, "{who}: {}: ", self.rule.name())?,
        }
        if let Some(s) = &self.source {
            write!(f, "{s}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// External functions the CUDA driver resolves when it loads a module: device `printf`.
pub const DRIVER_FUNCTIONS: [&str; 1] = ["vprintf"];

/// Direct call targets of a function (indirect calls through a register have no name).
pub fn calls(f: &PtxFunction) -> Vec<String> {
    let Some(body) = f.body.as_deref() else {
        return Vec::new();
    };
    parse::statements(body, f.body_line)
        .iter()
        .filter_map(|s| match s {
            parse::Statement::Instr(i) => cfg::call_target(i).map(str::to_string),
            parse::Statement::Label(_) => None,
        })
        .collect()
}

/// Whether `operand` names the symbol `name` (not a longer one that starts with it).
pub(crate) fn mentions(operand: &str, name: &str) -> bool {
    operand.match_indices(name).any(|(at, _)| {
        let after = operand[at + name.len()..].chars().next();
        let before = operand[..at].chars().next_back();
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
        !after.is_some_and(ident) && !before.is_some_and(ident)
    })
}
