//! Raw identifiers end to end: a raw-named factory, listed in a raw-named bean set of more
//! than one chunk (64) of members, in a raw-named application of more than one chunk of
//! entries. Generated macro names take the names without `r#`; the user's own names stay raw.
#![deny(warnings)]

use agent_core::{bean, bean_set, compose};
use std::sync::Arc;

/// A bean of step `N`.
#[derive(Debug)]
pub struct Step<const N: usize>;

/// The bean the raw-named factory builds.
#[derive(Debug)]
pub struct Kind;

/// A factory whose name is a keyword, written raw.
#[bean]
pub fn r#type() -> Arc<Kind> {
    Arc::new(Kind)
}

/// A raw-named factory that takes the raw-named one, by a raw parameter name.
#[bean]
pub fn r#match(r#type: Arc<Kind>) -> Arc<String> {
    let _ = r#type;
    Arc::new("match".to_owned())
}

#[bean]
pub fn r#s0() -> Arc<Step<0>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s1() -> Arc<Step<1>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s2() -> Arc<Step<2>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s3() -> Arc<Step<3>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s4() -> Arc<Step<4>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s5() -> Arc<Step<5>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s6() -> Arc<Step<6>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s7() -> Arc<Step<7>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s8() -> Arc<Step<8>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s9() -> Arc<Step<9>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s10() -> Arc<Step<10>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s11() -> Arc<Step<11>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s12() -> Arc<Step<12>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s13() -> Arc<Step<13>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s14() -> Arc<Step<14>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s15() -> Arc<Step<15>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s16() -> Arc<Step<16>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s17() -> Arc<Step<17>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s18() -> Arc<Step<18>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s19() -> Arc<Step<19>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s20() -> Arc<Step<20>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s21() -> Arc<Step<21>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s22() -> Arc<Step<22>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s23() -> Arc<Step<23>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s24() -> Arc<Step<24>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s25() -> Arc<Step<25>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s26() -> Arc<Step<26>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s27() -> Arc<Step<27>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s28() -> Arc<Step<28>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s29() -> Arc<Step<29>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s30() -> Arc<Step<30>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s31() -> Arc<Step<31>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s32() -> Arc<Step<32>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s33() -> Arc<Step<33>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s34() -> Arc<Step<34>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s35() -> Arc<Step<35>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s36() -> Arc<Step<36>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s37() -> Arc<Step<37>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s38() -> Arc<Step<38>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s39() -> Arc<Step<39>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s40() -> Arc<Step<40>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s41() -> Arc<Step<41>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s42() -> Arc<Step<42>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s43() -> Arc<Step<43>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s44() -> Arc<Step<44>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s45() -> Arc<Step<45>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s46() -> Arc<Step<46>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s47() -> Arc<Step<47>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s48() -> Arc<Step<48>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s49() -> Arc<Step<49>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s50() -> Arc<Step<50>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s51() -> Arc<Step<51>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s52() -> Arc<Step<52>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s53() -> Arc<Step<53>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s54() -> Arc<Step<54>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s55() -> Arc<Step<55>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s56() -> Arc<Step<56>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s57() -> Arc<Step<57>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s58() -> Arc<Step<58>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s59() -> Arc<Step<59>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s60() -> Arc<Step<60>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s61() -> Arc<Step<61>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s62() -> Arc<Step<62>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s63() -> Arc<Step<63>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s64() -> Arc<Step<64>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s65() -> Arc<Step<65>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s66() -> Arc<Step<66>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s67() -> Arc<Step<67>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s68() -> Arc<Step<68>> {
    Arc::new(Step)
}
#[bean]
pub fn r#s69() -> Arc<Step<69>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d0() -> Arc<Step<100>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d1() -> Arc<Step<101>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d2() -> Arc<Step<102>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d3() -> Arc<Step<103>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d4() -> Arc<Step<104>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d5() -> Arc<Step<105>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d6() -> Arc<Step<106>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d7() -> Arc<Step<107>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d8() -> Arc<Step<108>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d9() -> Arc<Step<109>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d10() -> Arc<Step<110>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d11() -> Arc<Step<111>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d12() -> Arc<Step<112>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d13() -> Arc<Step<113>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d14() -> Arc<Step<114>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d15() -> Arc<Step<115>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d16() -> Arc<Step<116>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d17() -> Arc<Step<117>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d18() -> Arc<Step<118>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d19() -> Arc<Step<119>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d20() -> Arc<Step<120>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d21() -> Arc<Step<121>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d22() -> Arc<Step<122>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d23() -> Arc<Step<123>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d24() -> Arc<Step<124>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d25() -> Arc<Step<125>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d26() -> Arc<Step<126>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d27() -> Arc<Step<127>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d28() -> Arc<Step<128>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d29() -> Arc<Step<129>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d30() -> Arc<Step<130>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d31() -> Arc<Step<131>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d32() -> Arc<Step<132>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d33() -> Arc<Step<133>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d34() -> Arc<Step<134>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d35() -> Arc<Step<135>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d36() -> Arc<Step<136>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d37() -> Arc<Step<137>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d38() -> Arc<Step<138>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d39() -> Arc<Step<139>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d40() -> Arc<Step<140>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d41() -> Arc<Step<141>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d42() -> Arc<Step<142>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d43() -> Arc<Step<143>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d44() -> Arc<Step<144>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d45() -> Arc<Step<145>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d46() -> Arc<Step<146>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d47() -> Arc<Step<147>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d48() -> Arc<Step<148>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d49() -> Arc<Step<149>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d50() -> Arc<Step<150>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d51() -> Arc<Step<151>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d52() -> Arc<Step<152>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d53() -> Arc<Step<153>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d54() -> Arc<Step<154>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d55() -> Arc<Step<155>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d56() -> Arc<Step<156>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d57() -> Arc<Step<157>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d58() -> Arc<Step<158>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d59() -> Arc<Step<159>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d60() -> Arc<Step<160>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d61() -> Arc<Step<161>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d62() -> Arc<Step<162>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d63() -> Arc<Step<163>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d64() -> Arc<Step<164>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d65() -> Arc<Step<165>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d66() -> Arc<Step<166>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d67() -> Arc<Step<167>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d68() -> Arc<Step<168>> {
    Arc::new(Step)
}
#[bean]
pub fn r#d69() -> Arc<Step<169>> {
    Arc::new(Step)
}

bean_set! {
    /// A set whose name is a keyword, with 71 members.
    pub r#struct = [r#type, r#s0, r#s1, r#s2, r#s3, r#s4, r#s5, r#s6, r#s7, r#s8, r#s9, r#s10, r#s11, r#s12, r#s13, r#s14, r#s15, r#s16, r#s17, r#s18, r#s19, r#s20, r#s21, r#s22, r#s23, r#s24, r#s25, r#s26, r#s27, r#s28, r#s29, r#s30, r#s31, r#s32, r#s33, r#s34, r#s35, r#s36, r#s37, r#s38, r#s39, r#s40, r#s41, r#s42, r#s43, r#s44, r#s45, r#s46, r#s47, r#s48, r#s49, r#s50, r#s51, r#s52, r#s53, r#s54, r#s55, r#s56, r#s57, r#s58, r#s59, r#s60, r#s61, r#s62, r#s63, r#s64, r#s65, r#s66, r#s67, r#s68, r#s69];
}

compose! {
    /// An application with a raw name and 72 entries.
    pub struct r#App { beans: [r#struct, r#match, r#d0, r#d1, r#d2, r#d3, r#d4, r#d5, r#d6, r#d7, r#d8, r#d9, r#d10, r#d11, r#d12, r#d13, r#d14, r#d15, r#d16, r#d17, r#d18, r#d19, r#d20, r#d21, r#d22, r#d23, r#d24, r#d25, r#d26, r#d27, r#d28, r#d29, r#d30, r#d31, r#d32, r#d33, r#d34, r#d35, r#d36, r#d37, r#d38, r#d39, r#d40, r#d41, r#d42, r#d43, r#d44, r#d45, r#d46, r#d47, r#d48, r#d49, r#d50, r#d51, r#d52, r#d53, r#d54, r#d55, r#d56, r#d57, r#d58, r#d59, r#d60, r#d61, r#d62, r#d63, r#d64, r#d65, r#d66, r#d67, r#d68, r#d69] }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let app = r#App::build().await.unwrap();
        let components: &AppComponents = app.components();
        let _: &Arc<Kind> = &components.r#type;
        assert_eq!(*components.r#match, "match");
        let _: &Arc<Step<69>> = &components.s69;
        let _: &Arc<Step<169>> = &components.d69;
        assert_eq!(r#App::manifest().order.len(), 142);
        assert!(r#App::manifest().order.contains(&"type"));
        app.stop().await.unwrap();
    });
}
