use phases::serve::{OfferedLoad, RequestOutcome};
use serde_json::Value;
use spawn::worker_proto::Reply;

use super::*;
use serde_json::json;
use std::path::Path;

fn target() -> Target {
    Target::reference_worker(Path::new("/nonexistent"))
}

fn reply(v: Value) -> Reply {
    serde_json::from_value(v).unwrap()
}

fn args(requests: Option<usize>, rate: Option<f64>, duration: Option<f64>) -> ServeOptions {
    ServeOptions {
        requests,
        rate,
        duration,
        ..ServeOptions::default()
    }
}

#[test]
fn in_flight_is_a_closed_loop_s_and_says_so_otherwise() {
    let k = |requests, rate, k| ServeOptions {
        in_flight: Some(k),
        ..args(requests, rate, None)
    };
    assert_eq!(
        k(Some(8), None, 3).load().unwrap(),
        Some(OfferedLoad::Closed {
            requests: 8,
            in_flight: 3
        })
    );
    assert_eq!(
        k(Some(8), None, 3).load().unwrap().unwrap().describe(),
        "closed loop, 8 requests, 3 in flight"
    );
    let e = |o: ServeOptions| o.load().unwrap_err().to_string();
    assert!(e(k(Some(8), None, 0)).contains("at least 1"));
    assert!(e(k(Some(8), Some(5.0), 2)).contains("closed loop"));
    assert!(e(k(None, None, 2)).contains("--requests N"));
}

#[test]
fn loads_from_flags() {
    assert_eq!(args(None, None, None).load().unwrap(), None);
    assert_eq!(
        args(Some(5), None, None).load().unwrap(),
        Some(OfferedLoad::Closed {
            requests: 5,
            in_flight: 1
        })
    );
    assert_eq!(
        args(None, Some(20.0), Some(2.0)).load().unwrap(),
        Some(OfferedLoad::open(20.0, 2.0))
    );
    assert_eq!(
        args(Some(30), Some(10.0), None).load().unwrap(),
        Some(OfferedLoad::open(10.0, 3.0))
    );
    assert_eq!(
        args(None, Some(3.0), None).load().unwrap(),
        Some(OfferedLoad::open(3.0, 10.0))
    );
    assert!(args(Some(0), None, None).load().is_err());
    assert!(args(None, Some(0.0), None).load().is_err());
    assert!(args(None, Some(1.0), Some(-1.0)).load().is_err());
}

#[test]
fn the_reference_worker_serves_infer_and_must_echo() {
    let plan = Plan::new(
        OfferedLoad::Closed {
            requests: 1,
            in_flight: 1,
        },
        None,
        &target(),
    )
    .unwrap();
    assert_eq!(plan.op, "infer");
    assert!(plan.expect_echo);
    let fields = Value::Object(plan.fields.clone());
    let good = reply(json!({"op": "infer", "response": {"echo": fields}, "id": 3}));
    assert_eq!(plan.judge(3, &good), RequestOutcome::Ok);
    let wrong_id = plan.judge(4, &good);
    assert!(
        matches!(wrong_id, RequestOutcome::WrongReply { ref problem } if problem.contains("id 3 where 4")),
        "{wrong_id:?}"
    );
    let no_echo = reply(json!({"op": "infer", "response": {}, "id": 3}));
    assert!(matches!(
        plan.judge(3, &no_echo),
        RequestOutcome::WrongReply { .. }
    ));
    let other = reply(json!({"op": "infer", "response": {"echo": {"text": "else"}}}));
    assert!(matches!(
        plan.judge(3, &other),
        RequestOutcome::WrongReply { .. }
    ));
    let err = reply(json!({"op": "error", "error": "busy", "id": 3}));
    assert_eq!(
        plan.judge(3, &err),
        RequestOutcome::ErrorReply {
            error: "busy".into()
        }
    );
}

#[test]
fn a_request_from_the_command_line() {
    let plan = Plan::new(
        OfferedLoad::Closed {
            requests: 1,
            in_flight: 1,
        },
        Some(r#"{"op": "health", "id": 9, "x": 1}"#),
        &Target::ad_hoc(Path::new("/"), vec!["w".into()], "w"),
    )
    .unwrap();
    assert_eq!(plan.describe(), json!({"op": "health", "x": 1}));
    assert!(!plan.expect_echo);
    assert_eq!(
        serde_json::to_value(plan.request(7)).unwrap(),
        json!({"op": "health", "x": 1, "id": 7})
    );
    let unhealthy = reply(json!({"op": "health", "response": {"status": "loading"}, "id": 7}));
    assert!(matches!(
        plan.judge(7, &unhealthy),
        RequestOutcome::WrongReply { .. }
    ));
    for bad in ["[1]", "{}", r#"{"op": "shutdown"}"#, "nope"] {
        assert!(
            Plan::new(
                OfferedLoad::Closed {
                    requests: 1,
                    in_flight: 1
                },
                Some(bad),
                &target()
            )
            .is_err(),
            "{bad}"
        );
    }
}
