//! The brokers' ACL files, administered through the brokers: list the accounts (never a
//! secret key), add, change or delete one, and ask who this client is (WHOAMI). Each call
//! goes to one broker; `ringmq-ctl acl` asks every master so a cluster's files stay alike.

use std::net::SocketAddr;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::{
    AclAccountChange, AclConfigList, AclWriteRequest, DeleteAclRequest, WhoAmI,
};

use super::Admin;
use crate::error::Result;

impl Admin {
    /// The broker's ACL accounts (without secret keys) and global white addresses
    /// (GET_BROKER_CLUSTER_ACL_CONFIG; needs an admin account).
    pub async fn acl_list(&self, addr: SocketAddr) -> Result<AclConfigList> {
        self.call(addr, RequestCode::GetBrokerClusterAclConfig, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }

    /// Adds (`mode` [`ACL_WRITE_CREATE`](ringmq_wire::command::ACL_WRITE_CREATE)) or
    /// changes ([`ACL_WRITE_UPDATE`](ringmq_wire::command::ACL_WRITE_UPDATE)) one account
    /// of the broker's ACL file (UPDATE_AND_CREATE_ACL_CONFIG; needs an admin account).
    pub async fn acl_write(
        &self,
        addr: SocketAddr,
        mode: u8,
        change: &AclAccountChange,
    ) -> Result<()> {
        let body = change.to_vec()?;
        self.call(
            addr,
            RequestCode::UpdateAndCreateAclConfig,
            &AclWriteRequest { mode },
            &body,
        )
        .await?
        .expect(&[Status::Success])?;
        Ok(())
    }

    /// Deletes one account of the broker's ACL file (DELETE_ACL_CONFIG; needs an admin
    /// account other than `access_key`).
    pub async fn acl_delete(&self, addr: SocketAddr, access_key: &str) -> Result<()> {
        let h = DeleteAclRequest {
            access_key: access_key.to_owned(),
        };
        self.call(addr, RequestCode::DeleteAclConfig, &h, &[])
            .await?
            .expect(&[Status::Success])?;
        Ok(())
    }

    /// Who this client is to the broker's ACL (WHOAMI).
    pub async fn whoami(&self, addr: SocketAddr) -> Result<WhoAmI> {
        self.call(addr, RequestCode::WhoAmI, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }
}
