//! More entries than the default recursion limit would allow in one chain: 150 factories
//! listed directly and a bean set of 150 members, each depending on the one before.
#![deny(warnings)]

use agent_core::compose;
use std::sync::Arc;

/// A bean of step `N`.
#[derive(Debug)]
pub struct Step<const N: usize>;

/// Factories listed directly in `compose!`.
pub mod direct {
    use super::Step;
    use agent_core::bean;
    use std::sync::Arc;

    #[bean]
    pub fn d0() -> Arc<Step<0>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d1(_previous: Arc<Step<0>>) -> Arc<Step<1>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d2(_previous: Arc<Step<1>>) -> Arc<Step<2>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d3(_previous: Arc<Step<2>>) -> Arc<Step<3>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d4(_previous: Arc<Step<3>>) -> Arc<Step<4>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d5(_previous: Arc<Step<4>>) -> Arc<Step<5>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d6(_previous: Arc<Step<5>>) -> Arc<Step<6>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d7(_previous: Arc<Step<6>>) -> Arc<Step<7>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d8(_previous: Arc<Step<7>>) -> Arc<Step<8>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d9(_previous: Arc<Step<8>>) -> Arc<Step<9>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d10(_previous: Arc<Step<9>>) -> Arc<Step<10>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d11(_previous: Arc<Step<10>>) -> Arc<Step<11>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d12(_previous: Arc<Step<11>>) -> Arc<Step<12>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d13(_previous: Arc<Step<12>>) -> Arc<Step<13>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d14(_previous: Arc<Step<13>>) -> Arc<Step<14>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d15(_previous: Arc<Step<14>>) -> Arc<Step<15>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d16(_previous: Arc<Step<15>>) -> Arc<Step<16>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d17(_previous: Arc<Step<16>>) -> Arc<Step<17>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d18(_previous: Arc<Step<17>>) -> Arc<Step<18>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d19(_previous: Arc<Step<18>>) -> Arc<Step<19>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d20(_previous: Arc<Step<19>>) -> Arc<Step<20>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d21(_previous: Arc<Step<20>>) -> Arc<Step<21>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d22(_previous: Arc<Step<21>>) -> Arc<Step<22>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d23(_previous: Arc<Step<22>>) -> Arc<Step<23>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d24(_previous: Arc<Step<23>>) -> Arc<Step<24>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d25(_previous: Arc<Step<24>>) -> Arc<Step<25>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d26(_previous: Arc<Step<25>>) -> Arc<Step<26>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d27(_previous: Arc<Step<26>>) -> Arc<Step<27>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d28(_previous: Arc<Step<27>>) -> Arc<Step<28>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d29(_previous: Arc<Step<28>>) -> Arc<Step<29>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d30(_previous: Arc<Step<29>>) -> Arc<Step<30>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d31(_previous: Arc<Step<30>>) -> Arc<Step<31>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d32(_previous: Arc<Step<31>>) -> Arc<Step<32>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d33(_previous: Arc<Step<32>>) -> Arc<Step<33>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d34(_previous: Arc<Step<33>>) -> Arc<Step<34>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d35(_previous: Arc<Step<34>>) -> Arc<Step<35>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d36(_previous: Arc<Step<35>>) -> Arc<Step<36>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d37(_previous: Arc<Step<36>>) -> Arc<Step<37>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d38(_previous: Arc<Step<37>>) -> Arc<Step<38>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d39(_previous: Arc<Step<38>>) -> Arc<Step<39>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d40(_previous: Arc<Step<39>>) -> Arc<Step<40>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d41(_previous: Arc<Step<40>>) -> Arc<Step<41>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d42(_previous: Arc<Step<41>>) -> Arc<Step<42>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d43(_previous: Arc<Step<42>>) -> Arc<Step<43>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d44(_previous: Arc<Step<43>>) -> Arc<Step<44>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d45(_previous: Arc<Step<44>>) -> Arc<Step<45>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d46(_previous: Arc<Step<45>>) -> Arc<Step<46>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d47(_previous: Arc<Step<46>>) -> Arc<Step<47>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d48(_previous: Arc<Step<47>>) -> Arc<Step<48>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d49(_previous: Arc<Step<48>>) -> Arc<Step<49>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d50(_previous: Arc<Step<49>>) -> Arc<Step<50>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d51(_previous: Arc<Step<50>>) -> Arc<Step<51>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d52(_previous: Arc<Step<51>>) -> Arc<Step<52>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d53(_previous: Arc<Step<52>>) -> Arc<Step<53>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d54(_previous: Arc<Step<53>>) -> Arc<Step<54>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d55(_previous: Arc<Step<54>>) -> Arc<Step<55>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d56(_previous: Arc<Step<55>>) -> Arc<Step<56>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d57(_previous: Arc<Step<56>>) -> Arc<Step<57>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d58(_previous: Arc<Step<57>>) -> Arc<Step<58>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d59(_previous: Arc<Step<58>>) -> Arc<Step<59>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d60(_previous: Arc<Step<59>>) -> Arc<Step<60>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d61(_previous: Arc<Step<60>>) -> Arc<Step<61>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d62(_previous: Arc<Step<61>>) -> Arc<Step<62>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d63(_previous: Arc<Step<62>>) -> Arc<Step<63>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d64(_previous: Arc<Step<63>>) -> Arc<Step<64>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d65(_previous: Arc<Step<64>>) -> Arc<Step<65>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d66(_previous: Arc<Step<65>>) -> Arc<Step<66>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d67(_previous: Arc<Step<66>>) -> Arc<Step<67>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d68(_previous: Arc<Step<67>>) -> Arc<Step<68>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d69(_previous: Arc<Step<68>>) -> Arc<Step<69>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d70(_previous: Arc<Step<69>>) -> Arc<Step<70>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d71(_previous: Arc<Step<70>>) -> Arc<Step<71>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d72(_previous: Arc<Step<71>>) -> Arc<Step<72>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d73(_previous: Arc<Step<72>>) -> Arc<Step<73>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d74(_previous: Arc<Step<73>>) -> Arc<Step<74>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d75(_previous: Arc<Step<74>>) -> Arc<Step<75>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d76(_previous: Arc<Step<75>>) -> Arc<Step<76>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d77(_previous: Arc<Step<76>>) -> Arc<Step<77>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d78(_previous: Arc<Step<77>>) -> Arc<Step<78>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d79(_previous: Arc<Step<78>>) -> Arc<Step<79>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d80(_previous: Arc<Step<79>>) -> Arc<Step<80>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d81(_previous: Arc<Step<80>>) -> Arc<Step<81>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d82(_previous: Arc<Step<81>>) -> Arc<Step<82>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d83(_previous: Arc<Step<82>>) -> Arc<Step<83>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d84(_previous: Arc<Step<83>>) -> Arc<Step<84>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d85(_previous: Arc<Step<84>>) -> Arc<Step<85>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d86(_previous: Arc<Step<85>>) -> Arc<Step<86>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d87(_previous: Arc<Step<86>>) -> Arc<Step<87>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d88(_previous: Arc<Step<87>>) -> Arc<Step<88>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d89(_previous: Arc<Step<88>>) -> Arc<Step<89>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d90(_previous: Arc<Step<89>>) -> Arc<Step<90>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d91(_previous: Arc<Step<90>>) -> Arc<Step<91>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d92(_previous: Arc<Step<91>>) -> Arc<Step<92>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d93(_previous: Arc<Step<92>>) -> Arc<Step<93>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d94(_previous: Arc<Step<93>>) -> Arc<Step<94>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d95(_previous: Arc<Step<94>>) -> Arc<Step<95>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d96(_previous: Arc<Step<95>>) -> Arc<Step<96>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d97(_previous: Arc<Step<96>>) -> Arc<Step<97>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d98(_previous: Arc<Step<97>>) -> Arc<Step<98>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d99(_previous: Arc<Step<98>>) -> Arc<Step<99>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d100(_previous: Arc<Step<99>>) -> Arc<Step<100>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d101(_previous: Arc<Step<100>>) -> Arc<Step<101>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d102(_previous: Arc<Step<101>>) -> Arc<Step<102>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d103(_previous: Arc<Step<102>>) -> Arc<Step<103>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d104(_previous: Arc<Step<103>>) -> Arc<Step<104>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d105(_previous: Arc<Step<104>>) -> Arc<Step<105>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d106(_previous: Arc<Step<105>>) -> Arc<Step<106>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d107(_previous: Arc<Step<106>>) -> Arc<Step<107>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d108(_previous: Arc<Step<107>>) -> Arc<Step<108>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d109(_previous: Arc<Step<108>>) -> Arc<Step<109>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d110(_previous: Arc<Step<109>>) -> Arc<Step<110>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d111(_previous: Arc<Step<110>>) -> Arc<Step<111>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d112(_previous: Arc<Step<111>>) -> Arc<Step<112>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d113(_previous: Arc<Step<112>>) -> Arc<Step<113>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d114(_previous: Arc<Step<113>>) -> Arc<Step<114>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d115(_previous: Arc<Step<114>>) -> Arc<Step<115>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d116(_previous: Arc<Step<115>>) -> Arc<Step<116>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d117(_previous: Arc<Step<116>>) -> Arc<Step<117>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d118(_previous: Arc<Step<117>>) -> Arc<Step<118>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d119(_previous: Arc<Step<118>>) -> Arc<Step<119>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d120(_previous: Arc<Step<119>>) -> Arc<Step<120>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d121(_previous: Arc<Step<120>>) -> Arc<Step<121>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d122(_previous: Arc<Step<121>>) -> Arc<Step<122>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d123(_previous: Arc<Step<122>>) -> Arc<Step<123>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d124(_previous: Arc<Step<123>>) -> Arc<Step<124>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d125(_previous: Arc<Step<124>>) -> Arc<Step<125>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d126(_previous: Arc<Step<125>>) -> Arc<Step<126>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d127(_previous: Arc<Step<126>>) -> Arc<Step<127>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d128(_previous: Arc<Step<127>>) -> Arc<Step<128>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d129(_previous: Arc<Step<128>>) -> Arc<Step<129>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d130(_previous: Arc<Step<129>>) -> Arc<Step<130>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d131(_previous: Arc<Step<130>>) -> Arc<Step<131>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d132(_previous: Arc<Step<131>>) -> Arc<Step<132>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d133(_previous: Arc<Step<132>>) -> Arc<Step<133>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d134(_previous: Arc<Step<133>>) -> Arc<Step<134>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d135(_previous: Arc<Step<134>>) -> Arc<Step<135>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d136(_previous: Arc<Step<135>>) -> Arc<Step<136>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d137(_previous: Arc<Step<136>>) -> Arc<Step<137>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d138(_previous: Arc<Step<137>>) -> Arc<Step<138>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d139(_previous: Arc<Step<138>>) -> Arc<Step<139>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d140(_previous: Arc<Step<139>>) -> Arc<Step<140>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d141(_previous: Arc<Step<140>>) -> Arc<Step<141>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d142(_previous: Arc<Step<141>>) -> Arc<Step<142>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d143(_previous: Arc<Step<142>>) -> Arc<Step<143>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d144(_previous: Arc<Step<143>>) -> Arc<Step<144>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d145(_previous: Arc<Step<144>>) -> Arc<Step<145>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d146(_previous: Arc<Step<145>>) -> Arc<Step<146>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d147(_previous: Arc<Step<146>>) -> Arc<Step<147>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d148(_previous: Arc<Step<147>>) -> Arc<Step<148>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn d149(_previous: Arc<Step<148>>) -> Arc<Step<149>> {
        Arc::new(Step)
    }
}

/// Factories grouped in one bean set.
pub mod grouped {
    use super::Step;
    use agent_core::bean;
    use std::sync::Arc;

    #[bean]
    pub fn g150(_previous: Arc<Step<149>>) -> Arc<Step<150>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g151(_previous: Arc<Step<150>>) -> Arc<Step<151>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g152(_previous: Arc<Step<151>>) -> Arc<Step<152>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g153(_previous: Arc<Step<152>>) -> Arc<Step<153>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g154(_previous: Arc<Step<153>>) -> Arc<Step<154>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g155(_previous: Arc<Step<154>>) -> Arc<Step<155>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g156(_previous: Arc<Step<155>>) -> Arc<Step<156>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g157(_previous: Arc<Step<156>>) -> Arc<Step<157>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g158(_previous: Arc<Step<157>>) -> Arc<Step<158>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g159(_previous: Arc<Step<158>>) -> Arc<Step<159>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g160(_previous: Arc<Step<159>>) -> Arc<Step<160>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g161(_previous: Arc<Step<160>>) -> Arc<Step<161>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g162(_previous: Arc<Step<161>>) -> Arc<Step<162>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g163(_previous: Arc<Step<162>>) -> Arc<Step<163>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g164(_previous: Arc<Step<163>>) -> Arc<Step<164>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g165(_previous: Arc<Step<164>>) -> Arc<Step<165>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g166(_previous: Arc<Step<165>>) -> Arc<Step<166>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g167(_previous: Arc<Step<166>>) -> Arc<Step<167>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g168(_previous: Arc<Step<167>>) -> Arc<Step<168>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g169(_previous: Arc<Step<168>>) -> Arc<Step<169>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g170(_previous: Arc<Step<169>>) -> Arc<Step<170>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g171(_previous: Arc<Step<170>>) -> Arc<Step<171>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g172(_previous: Arc<Step<171>>) -> Arc<Step<172>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g173(_previous: Arc<Step<172>>) -> Arc<Step<173>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g174(_previous: Arc<Step<173>>) -> Arc<Step<174>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g175(_previous: Arc<Step<174>>) -> Arc<Step<175>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g176(_previous: Arc<Step<175>>) -> Arc<Step<176>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g177(_previous: Arc<Step<176>>) -> Arc<Step<177>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g178(_previous: Arc<Step<177>>) -> Arc<Step<178>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g179(_previous: Arc<Step<178>>) -> Arc<Step<179>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g180(_previous: Arc<Step<179>>) -> Arc<Step<180>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g181(_previous: Arc<Step<180>>) -> Arc<Step<181>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g182(_previous: Arc<Step<181>>) -> Arc<Step<182>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g183(_previous: Arc<Step<182>>) -> Arc<Step<183>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g184(_previous: Arc<Step<183>>) -> Arc<Step<184>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g185(_previous: Arc<Step<184>>) -> Arc<Step<185>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g186(_previous: Arc<Step<185>>) -> Arc<Step<186>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g187(_previous: Arc<Step<186>>) -> Arc<Step<187>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g188(_previous: Arc<Step<187>>) -> Arc<Step<188>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g189(_previous: Arc<Step<188>>) -> Arc<Step<189>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g190(_previous: Arc<Step<189>>) -> Arc<Step<190>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g191(_previous: Arc<Step<190>>) -> Arc<Step<191>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g192(_previous: Arc<Step<191>>) -> Arc<Step<192>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g193(_previous: Arc<Step<192>>) -> Arc<Step<193>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g194(_previous: Arc<Step<193>>) -> Arc<Step<194>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g195(_previous: Arc<Step<194>>) -> Arc<Step<195>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g196(_previous: Arc<Step<195>>) -> Arc<Step<196>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g197(_previous: Arc<Step<196>>) -> Arc<Step<197>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g198(_previous: Arc<Step<197>>) -> Arc<Step<198>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g199(_previous: Arc<Step<198>>) -> Arc<Step<199>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g200(_previous: Arc<Step<199>>) -> Arc<Step<200>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g201(_previous: Arc<Step<200>>) -> Arc<Step<201>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g202(_previous: Arc<Step<201>>) -> Arc<Step<202>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g203(_previous: Arc<Step<202>>) -> Arc<Step<203>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g204(_previous: Arc<Step<203>>) -> Arc<Step<204>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g205(_previous: Arc<Step<204>>) -> Arc<Step<205>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g206(_previous: Arc<Step<205>>) -> Arc<Step<206>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g207(_previous: Arc<Step<206>>) -> Arc<Step<207>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g208(_previous: Arc<Step<207>>) -> Arc<Step<208>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g209(_previous: Arc<Step<208>>) -> Arc<Step<209>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g210(_previous: Arc<Step<209>>) -> Arc<Step<210>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g211(_previous: Arc<Step<210>>) -> Arc<Step<211>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g212(_previous: Arc<Step<211>>) -> Arc<Step<212>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g213(_previous: Arc<Step<212>>) -> Arc<Step<213>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g214(_previous: Arc<Step<213>>) -> Arc<Step<214>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g215(_previous: Arc<Step<214>>) -> Arc<Step<215>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g216(_previous: Arc<Step<215>>) -> Arc<Step<216>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g217(_previous: Arc<Step<216>>) -> Arc<Step<217>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g218(_previous: Arc<Step<217>>) -> Arc<Step<218>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g219(_previous: Arc<Step<218>>) -> Arc<Step<219>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g220(_previous: Arc<Step<219>>) -> Arc<Step<220>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g221(_previous: Arc<Step<220>>) -> Arc<Step<221>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g222(_previous: Arc<Step<221>>) -> Arc<Step<222>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g223(_previous: Arc<Step<222>>) -> Arc<Step<223>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g224(_previous: Arc<Step<223>>) -> Arc<Step<224>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g225(_previous: Arc<Step<224>>) -> Arc<Step<225>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g226(_previous: Arc<Step<225>>) -> Arc<Step<226>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g227(_previous: Arc<Step<226>>) -> Arc<Step<227>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g228(_previous: Arc<Step<227>>) -> Arc<Step<228>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g229(_previous: Arc<Step<228>>) -> Arc<Step<229>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g230(_previous: Arc<Step<229>>) -> Arc<Step<230>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g231(_previous: Arc<Step<230>>) -> Arc<Step<231>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g232(_previous: Arc<Step<231>>) -> Arc<Step<232>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g233(_previous: Arc<Step<232>>) -> Arc<Step<233>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g234(_previous: Arc<Step<233>>) -> Arc<Step<234>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g235(_previous: Arc<Step<234>>) -> Arc<Step<235>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g236(_previous: Arc<Step<235>>) -> Arc<Step<236>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g237(_previous: Arc<Step<236>>) -> Arc<Step<237>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g238(_previous: Arc<Step<237>>) -> Arc<Step<238>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g239(_previous: Arc<Step<238>>) -> Arc<Step<239>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g240(_previous: Arc<Step<239>>) -> Arc<Step<240>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g241(_previous: Arc<Step<240>>) -> Arc<Step<241>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g242(_previous: Arc<Step<241>>) -> Arc<Step<242>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g243(_previous: Arc<Step<242>>) -> Arc<Step<243>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g244(_previous: Arc<Step<243>>) -> Arc<Step<244>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g245(_previous: Arc<Step<244>>) -> Arc<Step<245>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g246(_previous: Arc<Step<245>>) -> Arc<Step<246>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g247(_previous: Arc<Step<246>>) -> Arc<Step<247>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g248(_previous: Arc<Step<247>>) -> Arc<Step<248>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g249(_previous: Arc<Step<248>>) -> Arc<Step<249>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g250(_previous: Arc<Step<249>>) -> Arc<Step<250>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g251(_previous: Arc<Step<250>>) -> Arc<Step<251>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g252(_previous: Arc<Step<251>>) -> Arc<Step<252>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g253(_previous: Arc<Step<252>>) -> Arc<Step<253>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g254(_previous: Arc<Step<253>>) -> Arc<Step<254>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g255(_previous: Arc<Step<254>>) -> Arc<Step<255>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g256(_previous: Arc<Step<255>>) -> Arc<Step<256>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g257(_previous: Arc<Step<256>>) -> Arc<Step<257>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g258(_previous: Arc<Step<257>>) -> Arc<Step<258>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g259(_previous: Arc<Step<258>>) -> Arc<Step<259>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g260(_previous: Arc<Step<259>>) -> Arc<Step<260>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g261(_previous: Arc<Step<260>>) -> Arc<Step<261>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g262(_previous: Arc<Step<261>>) -> Arc<Step<262>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g263(_previous: Arc<Step<262>>) -> Arc<Step<263>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g264(_previous: Arc<Step<263>>) -> Arc<Step<264>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g265(_previous: Arc<Step<264>>) -> Arc<Step<265>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g266(_previous: Arc<Step<265>>) -> Arc<Step<266>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g267(_previous: Arc<Step<266>>) -> Arc<Step<267>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g268(_previous: Arc<Step<267>>) -> Arc<Step<268>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g269(_previous: Arc<Step<268>>) -> Arc<Step<269>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g270(_previous: Arc<Step<269>>) -> Arc<Step<270>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g271(_previous: Arc<Step<270>>) -> Arc<Step<271>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g272(_previous: Arc<Step<271>>) -> Arc<Step<272>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g273(_previous: Arc<Step<272>>) -> Arc<Step<273>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g274(_previous: Arc<Step<273>>) -> Arc<Step<274>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g275(_previous: Arc<Step<274>>) -> Arc<Step<275>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g276(_previous: Arc<Step<275>>) -> Arc<Step<276>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g277(_previous: Arc<Step<276>>) -> Arc<Step<277>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g278(_previous: Arc<Step<277>>) -> Arc<Step<278>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g279(_previous: Arc<Step<278>>) -> Arc<Step<279>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g280(_previous: Arc<Step<279>>) -> Arc<Step<280>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g281(_previous: Arc<Step<280>>) -> Arc<Step<281>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g282(_previous: Arc<Step<281>>) -> Arc<Step<282>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g283(_previous: Arc<Step<282>>) -> Arc<Step<283>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g284(_previous: Arc<Step<283>>) -> Arc<Step<284>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g285(_previous: Arc<Step<284>>) -> Arc<Step<285>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g286(_previous: Arc<Step<285>>) -> Arc<Step<286>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g287(_previous: Arc<Step<286>>) -> Arc<Step<287>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g288(_previous: Arc<Step<287>>) -> Arc<Step<288>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g289(_previous: Arc<Step<288>>) -> Arc<Step<289>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g290(_previous: Arc<Step<289>>) -> Arc<Step<290>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g291(_previous: Arc<Step<290>>) -> Arc<Step<291>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g292(_previous: Arc<Step<291>>) -> Arc<Step<292>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g293(_previous: Arc<Step<292>>) -> Arc<Step<293>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g294(_previous: Arc<Step<293>>) -> Arc<Step<294>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g295(_previous: Arc<Step<294>>) -> Arc<Step<295>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g296(_previous: Arc<Step<295>>) -> Arc<Step<296>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g297(_previous: Arc<Step<296>>) -> Arc<Step<297>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g298(_previous: Arc<Step<297>>) -> Arc<Step<298>> {
        Arc::new(Step)
    }
    #[bean]
    pub fn g299(_previous: Arc<Step<298>>) -> Arc<Step<299>> {
        Arc::new(Step)
    }

    agent_core::bean_set! {
        /// All 150 grouped factories.
        pub all = [g150, g151, g152, g153, g154, g155, g156, g157, g158, g159, g160, g161, g162, g163, g164, g165, g166, g167, g168, g169, g170, g171, g172, g173, g174, g175, g176, g177, g178, g179, g180, g181, g182, g183, g184, g185, g186, g187, g188, g189, g190, g191, g192, g193, g194, g195, g196, g197, g198, g199, g200, g201, g202, g203, g204, g205, g206, g207, g208, g209, g210, g211, g212, g213, g214, g215, g216, g217, g218, g219, g220, g221, g222, g223, g224, g225, g226, g227, g228, g229, g230, g231, g232, g233, g234, g235, g236, g237, g238, g239, g240, g241, g242, g243, g244, g245, g246, g247, g248, g249, g250, g251, g252, g253, g254, g255, g256, g257, g258, g259, g260, g261, g262, g263, g264, g265, g266, g267, g268, g269, g270, g271, g272, g273, g274, g275, g276, g277, g278, g279, g280, g281, g282, g283, g284, g285, g286, g287, g288, g289, g290, g291, g292, g293, g294, g295, g296, g297, g298, g299];
    }
}

compose! {
    /// 300 beans.
    pub struct App {
        beans: [direct::d0, direct::d1, direct::d2, direct::d3, direct::d4, direct::d5, direct::d6, direct::d7, direct::d8, direct::d9, direct::d10, direct::d11, direct::d12, direct::d13, direct::d14, direct::d15, direct::d16, direct::d17, direct::d18, direct::d19, direct::d20, direct::d21, direct::d22, direct::d23, direct::d24, direct::d25, direct::d26, direct::d27, direct::d28, direct::d29, direct::d30, direct::d31, direct::d32, direct::d33, direct::d34, direct::d35, direct::d36, direct::d37, direct::d38, direct::d39, direct::d40, direct::d41, direct::d42, direct::d43, direct::d44, direct::d45, direct::d46, direct::d47, direct::d48, direct::d49, direct::d50, direct::d51, direct::d52, direct::d53, direct::d54, direct::d55, direct::d56, direct::d57, direct::d58, direct::d59, direct::d60, direct::d61, direct::d62, direct::d63, direct::d64, direct::d65, direct::d66, direct::d67, direct::d68, direct::d69, direct::d70, direct::d71, direct::d72, direct::d73, direct::d74, direct::d75, direct::d76, direct::d77, direct::d78, direct::d79, direct::d80, direct::d81, direct::d82, direct::d83, direct::d84, direct::d85, direct::d86, direct::d87, direct::d88, direct::d89, direct::d90, direct::d91, direct::d92, direct::d93, direct::d94, direct::d95, direct::d96, direct::d97, direct::d98, direct::d99, direct::d100, direct::d101, direct::d102, direct::d103, direct::d104, direct::d105, direct::d106, direct::d107, direct::d108, direct::d109, direct::d110, direct::d111, direct::d112, direct::d113, direct::d114, direct::d115, direct::d116, direct::d117, direct::d118, direct::d119, direct::d120, direct::d121, direct::d122, direct::d123, direct::d124, direct::d125, direct::d126, direct::d127, direct::d128, direct::d129, direct::d130, direct::d131, direct::d132, direct::d133, direct::d134, direct::d135, direct::d136, direct::d137, direct::d138, direct::d139, direct::d140, direct::d141, direct::d142, direct::d143, direct::d144, direct::d145, direct::d146, direct::d147, direct::d148, direct::d149, grouped::all],
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let app = App::build().await.expect("the graph builds");
        let _: &Arc<Step<299>> = &app.components().g299;
        assert_eq!(App::manifest().beans.len(), 300);
        assert_eq!(App::manifest().order.first(), Some(&"d0"));
        assert_eq!(App::manifest().order.last(), Some(&"g299"));
        app.stop().await.expect("stops");
    });
}
