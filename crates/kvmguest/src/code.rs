//! The guest's two loops, assembled with iced-x86.
//!
//! Both end with `hlt`, leaving the cycle count in RAX. `rdtsc` is fenced with
//! `lfence` so that the timed instructions neither start early nor finish late.

use iced_x86::IcedError;
use iced_x86::code_asm::*;

use crate::layout::{CODE, OFFSETS, WS_VA};

/// `rdi` iterations of `mov cr3, rsi` (or of nothing, if `with_load` is false):
/// RAX = TSC cycles of the whole loop.
pub fn cr3_loop(with_load: bool) -> Result<Vec<u8>, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut top = a.create_label();
    a.lfence()?;
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    a.mov(r8, rax)?;
    a.set_label(&mut top)?;
    if with_load {
        a.mov(cr3, rsi)?;
    } else {
        a.nop()?;
    }
    a.dec(rdi)?;
    a.jnz(top)?;
    a.lfence()?;
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    a.sub(rax, r8)?;
    a.hlt()?;
    a.assemble(CODE)
}

/// Figure 6's loop: `rdi` times, optionally `mov cr3, rsi`, then one load from the
/// working set at the next offset of the array, timed alone. RAX = the sum of the
/// timed loads' cycles; R12 = the sum of the values loaded (a check that the loads
/// read what the host put there).
pub fn access_loop(with_load: bool) -> Result<Vec<u8>, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut top = a.create_label();
    a.xor(r10, r10)?;
    a.xor(r12, r12)?;
    a.mov(rbx, OFFSETS)?;
    a.mov(r9, WS_VA)?;
    a.set_label(&mut top)?;
    if with_load {
        a.mov(cr3, rsi)?;
    }
    a.mov(rcx, qword_ptr(rbx))?;
    a.add(rbx, 8)?;
    a.lfence()?;
    a.rdtsc()?;
    a.mov(r8d, eax)?;
    a.lfence()?;
    a.mov(r11, qword_ptr(r9 + rcx))?;
    a.lfence()?;
    a.rdtsc()?;
    a.sub(eax, r8d)?;
    a.add(r10, rax)?;
    a.add(r12, r11)?;
    a.dec(rdi)?;
    a.jnz(top)?;
    a.mov(rax, r10)?;
    a.hlt()?;
    a.assemble(CODE)
}
