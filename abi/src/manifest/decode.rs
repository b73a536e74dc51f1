//! Reading a record back: [`decode`], the builder's way from the PTX to a [`KernelSig`].

use super::extra_sig::{RequireSig, ScratchSig};
use super::record::MAGIC;
use super::sig::{KernelSig, ParamSig, TileSig};
use crate::dtype::DType;
use crate::extras::{Cmp, Operand, ScratchLen, OPERAND_BYTES, SCRATCH_BYTES};
use crate::extras::{TAG_PERSIST, TAG_REQUIRE, TAG_SCRATCH, TAG_TILE, TAG_ZERO, TILE_BYTES};
use crate::kinds::ParamKind;
use crate::launch::LaunchSpec;
use std::format;
use std::string::String;
use std::vec::Vec;

/// Decodes one record written by [`encode`](super::encode).
pub fn decode(bytes: &[u8]) -> Result<KernelSig, String> {
    let mut r = Reader { b: bytes, at: 0 };
    if r.take(4)? != MAGIC {
        return Err("bad manifest record magic".into());
    }
    let name = r.string()?;
    let family = r.string()?;
    let n = r.u8()? as usize;
    let mut params = Vec::with_capacity(n);
    for _ in 0..n {
        let pname = r.string()?;
        let kind = r.u8()?;
        let dtype = r.u8()?;
        let rank = r.u8()?;
        let mutable = r.u8()?;
        let size = u16::from_le_bytes([r.u8()?, r.u8()?]);
        let align = u16::from_le_bytes([r.u8()?, r.u8()?]);
        let kind = ParamKind::from_code(kind)
            .ok_or_else(|| format!("parameter `{pname}`: unknown kind code {kind}"))?;
        let dtype = DType::from_code(dtype)
            .ok_or_else(|| format!("parameter `{pname}`: unknown dtype code {dtype}"))?;
        if mutable > 1 {
            return Err(format!("parameter `{pname}`: bad mutability flag"));
        }
        params.push(ParamSig {
            name: pname,
            kind: kind.name().into(),
            dtype: dtype.name().into(),
            rank,
            mutable: mutable == 1,
            size,
            align,
            tile: None,
        });
    }
    let ngroups = r.u8()? as usize;
    let mut same_shape = Vec::with_capacity(ngroups);
    for _ in 0..ngroups {
        let count = r.u8()? as usize;
        let g = r.take(count)?.to_vec();
        if g.iter().any(|&i| i as usize >= params.len()) {
            return Err("same-shape group names a parameter that does not exist".into());
        }
        same_shape.push(g);
    }
    let ipt = u16::from_le_bytes([r.u8()?, r.u8()?]);
    let mut sig = KernelSig {
        name,
        family,
        params,
        same_shape,
        items_per_thread: (ipt != 0).then_some(ipt),
        launch: LaunchSpec::default(),
        zero: Vec::new(),
        scratch: Vec::new(),
        require: Vec::new(),
        arch: None,
    };
    while r.at != bytes.len() {
        let tag = r.u8()?;
        let len = u16::from_le_bytes([r.u8()?, r.u8()?]) as usize;
        let mut s = Reader {
            b: r.take(len)?,
            at: 0,
        };
        let count = s.u8()? as usize;
        match tag {
            TAG_ZERO => sig.zero = s.take(count)?.to_vec(),
            TAG_SCRATCH => {
                for _ in 0..count {
                    let e = s.take(SCRATCH_BYTES)?;
                    let u = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
                    sig.scratch.push(ScratchSig::of_len(&ScratchLen {
                        param: e[0],
                        per_block: u(1),
                        constant: u(5),
                        of: e[9],
                        mult: u(10),
                        div: u(14),
                        persist: false,
                    }));
                }
            }
            TAG_PERSIST => {
                // After the scratch section (the encoder's order): each entry names one of
                // its workspaces.
                for &p in s.take(count)? {
                    let w = sig.scratch.iter_mut().find(|w| w.param == p);
                    w.ok_or_else(|| format!("persist({p}) names no scratch workspace"))?
                        .persist = true;
                }
            }
            TAG_REQUIRE => {
                for _ in 0..count {
                    let lhs = s.operand()?;
                    let code = s.u8()?;
                    let cmp = Cmp::from_code(code)
                        .ok_or_else(|| format!("unknown comparison code {code}"))?;
                    let rhs = s.operand()?;
                    let n = s.u8()? as usize;
                    let message = String::from_utf8(s.take(n)?.to_vec())
                        .map_err(|_| "non-UTF-8 requirement message")?;
                    sig.require.push(RequireSig {
                        lhs: lhs.into(),
                        op: cmp.symbol().into(),
                        rhs: rhs.into(),
                        message,
                    });
                }
            }
            TAG_TILE => {
                for _ in 0..count {
                    let e = s.take(TILE_BYTES)?;
                    let (param, rank, swizzle) = (e[0] as usize, e[1] as usize, e[2]);
                    let dims: Vec<u32> = (0..rank.min(5))
                        .map(|d| u32::from(u16::from_le_bytes([e[3 + 2 * d], e[4 + 2 * d]])))
                        .collect();
                    let p = sig
                        .params
                        .get_mut(param)
                        .ok_or("a tensor-map declaration names no parameter")?;
                    p.tile = Some(TileSig {
                        box_dims: dims,
                        swizzle: u32::from(swizzle),
                    });
                }
            }
            _ => {
                return Err(format!(
                    "unknown manifest record section {tag} (a record from a newer \
                     ferrocuda-device?)"
                ))
            }
        }
        if s.at != s.b.len() {
            return Err("trailing bytes in manifest record section".into());
        }
    }
    sig.check_extras()?;
    Ok(sig)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or("truncated manifest record")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn operand(&mut self) -> Result<Operand, String> {
        let b = self.take(OPERAND_BYTES)?;
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[3..11]);
        Operand::from_code(b[0], b[1], b[2], i64::from_le_bytes(v))
            .ok_or_else(|| format!("unknown operand kind {}", b[0]))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u8()? as usize;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| "non-UTF-8 name in manifest".into())
    }
}
