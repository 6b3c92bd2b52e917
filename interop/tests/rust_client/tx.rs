//! Transactions: a half message committed by the local transaction, one rolled back, and
//! one left unknown that the broker checks back (CHECK_TRANSACTION_STATE on the producer's
//! connection) and the checker commits. Consumers see exactly the committed two.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    LocalTransactionState, MQPushConsumer, TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::MessageTrait;

use super::groups::create_topic;
use super::rmq::{self, code, wait_deliveries, Record, Rmq};
use super::sends::{assert_as_sent, message, Sent};

/// Decides by the message's `case` property; records the checks it is asked.
pub struct ByCase {
    pub checked: Arc<Mutex<Vec<String>>>,
}

fn case_of(value: Option<CheetahString>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

impl TransactionListener for ByCase {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        match case_of(msg.property(&CheetahString::from_static_str("case"))).as_str() {
            "commit" => LocalTransactionState::CommitMessage,
            "rollback" => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let case = case_of(msg.property(&CheetahString::from_static_str("case")));
        self.checked
            .lock()
            .expect("the checks' lock")
            .push(case.clone());
        match case.as_str() {
            "check" | "commit" => LocalTransactionState::CommitMessage,
            _ => LocalTransactionState::RollbackMessage,
        }
    }
}

pub async fn commit_rollback_and_check_back(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropTx";
    create_topic(&rmq, topic).await;
    let checked = Arc::new(Mutex::new(Vec::new()));
    let mut producer = TransactionMQProducer::builder(rmq.client_runtime())
        .producer_group("interop-tx-pg")
        .name_server_addr(rmq.namesrv.clone())
        .topics(vec![topic])
        .send_msg_timeout(5_000)
        .rpc_hook(rmq.wire.clone())
        .transaction_listener(ByCase {
            checked: checked.clone(),
        })
        .build();
    producer
        .start()
        .await
        .expect("starting the transaction producer");

    let mut sent = Sent::new();
    let mut want = Sent::new();
    for case in ["commit", "rollback", "check"] {
        let body = format!("tx-{case}");
        let m = message(
            &mut sent,
            topic,
            &body,
            "TagT",
            &[&format!("tx-key-{case}")],
            &[("case", case)],
        );
        let r = producer
            .send_message_in_transaction::<(), _>(m, None)
            .await
            .unwrap_or_else(|e| panic!("sending {body} in a transaction: {e}"));
        let expected = match case {
            "commit" => LocalTransactionState::CommitMessage,
            "rollback" => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        };
        assert_eq!(r.local_transaction_state, Some(expected), "{body}: {r:?}");
        let sr = r.send_result.as_ref().expect("the half's send result");
        assert!(
            sr.msg_id.is_some() && sr.offset_msg_id.is_some(),
            "{body}: {r:?}"
        );
        if case != "rollback" {
            want.insert(body.clone(), sent[&body].clone());
        }
    }

    let sink = rmq::sink();
    let mut c = rmq.push("interop-tx-cg", topic, "TagT").await;
    c.register_message_listener_concurrently(Record::ok("c", &sink));
    c.start().await.expect("starting the consumer");
    wait_deliveries(
        &sink,
        Duration::from_secs(30),
        "the committed and the checked-back message",
        |g| want.keys().all(|b| g.iter().any(|x| &x.body_str() == b)),
    )
    .await;
    let asked = checked.lock().expect("the checks' lock").clone();
    assert!(
        asked.iter().any(|c| c == "check"),
        "the broker checked the unknown one back: {asked:?}"
    );
    // Time for the rolled back one to show up if it ever would (checks run every second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_as_sent(&want, &rmq::snapshot(&sink));
    let asked = checked.lock().expect("the checks' lock").clone();
    assert!(
        !asked.iter().any(|c| c == "commit" || c == "rollback"),
        "decided transactions are not checked back: {asked:?}"
    );
    c.shutdown().await;
    producer.shutdown().await;
    rmq.wire.assert_sent(&[code::END_TRANSACTION]);
    rmq.finish().await;
}
