//! ACL 2.0's users and policies, administered through one broker with RocketMQ 5's AUTH_*
//! requests (3001-3010; their bodies are RocketMQ's `UserInfo` / `AclInfo` JSON). Each call
//! needs a super user's signature. `ringmq-ctl user` and `ringmq-ctl acl policy` ask every
//! master so a cluster's users and policies stay alike.

use std::net::SocketAddr;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Encode;
use ringmq_wire::command::{
    AclInfo, AuthAclRequest, AuthDeleteAclRequest, AuthListAclsRequest, AuthListUsersRequest,
    AuthUserRequest, UserInfo,
};
use ringmq_wire::remoting::body::JsonBody;

use super::Admin;
use crate::error::Result;

impl Admin {
    /// AUTH_CREATE_USER (`update` false) or AUTH_UPDATE_USER (true).
    pub async fn user_write(&self, addr: SocketAddr, update: bool, user: &UserInfo) -> Result<()> {
        let code = if update {
            RequestCode::AuthUpdateUser
        } else {
            RequestCode::AuthCreateUser
        };
        let h = AuthUserRequest {
            username: user.username.clone().unwrap_or_default(),
        };
        self.auth_call(addr, code, &h, &user.to_json())
            .await
            .map(drop)
    }

    /// AUTH_DELETE_USER (also deletes the user's ACL).
    pub async fn user_delete(&self, addr: SocketAddr, username: &str) -> Result<()> {
        let h = AuthUserRequest {
            username: username.to_owned(),
        };
        self.auth_call(addr, RequestCode::AuthDeleteUser, &h, &[])
            .await
            .map(drop)
    }

    /// AUTH_GET_USER: `None` when the user does not exist. No password comes back.
    pub async fn user_get(&self, addr: SocketAddr, username: &str) -> Result<Option<UserInfo>> {
        let h = AuthUserRequest {
            username: username.to_owned(),
        };
        let body = self
            .auth_call(addr, RequestCode::AuthGetUser, &h, &[])
            .await?;
        if body.is_empty() {
            return Ok(None);
        }
        Ok(Some(UserInfo::from_json(&body)?))
    }

    /// AUTH_LIST_USER: users whose name contains `filter` (all when empty).
    pub async fn user_list(&self, addr: SocketAddr, filter: &str) -> Result<Vec<UserInfo>> {
        let h = AuthListUsersRequest {
            filter: filter.to_owned(),
        };
        let body = self
            .auth_call(addr, RequestCode::AuthListUser, &h, &[])
            .await?;
        if body.is_empty() {
            return Ok(Vec::new());
        }
        Ok(Vec::<UserInfo>::from_json(&body)?)
    }

    /// AUTH_CREATE_ACL (`update` false) or AUTH_UPDATE_ACL (true): the entries merge into
    /// the subject's policies.
    pub async fn policy_write(&self, addr: SocketAddr, update: bool, acl: &AclInfo) -> Result<()> {
        let code = if update {
            RequestCode::AuthUpdateAcl
        } else {
            RequestCode::AuthCreateAcl
        };
        let h = AuthAclRequest {
            subject: acl.subject.clone().unwrap_or_default(),
        };
        self.auth_call(addr, code, &h, &acl.to_json())
            .await
            .map(drop)
    }

    /// AUTH_DELETE_ACL: the subject's whole ACL when `resource` is empty, else that entry of
    /// the policy `policy_type` (`Custom` when empty).
    pub async fn policy_delete(
        &self,
        addr: SocketAddr,
        subject: &str,
        policy_type: &str,
        resource: &str,
    ) -> Result<()> {
        let h = AuthDeleteAclRequest {
            subject: subject.to_owned(),
            policy_type: policy_type.to_owned(),
            resource: resource.to_owned(),
        };
        self.auth_call(addr, RequestCode::AuthDeleteAcl, &h, &[])
            .await
            .map(drop)
    }

    /// AUTH_GET_ACL: `None` when the subject has no ACL.
    pub async fn policy_get(&self, addr: SocketAddr, subject: &str) -> Result<Option<AclInfo>> {
        let h = AuthAclRequest {
            subject: subject.to_owned(),
        };
        let body = self
            .auth_call(addr, RequestCode::AuthGetAcl, &h, &[])
            .await?;
        if body.is_empty() {
            return Ok(None);
        }
        Ok(Some(AclInfo::from_json(&body)?))
    }

    /// AUTH_LIST_ACL.
    pub async fn policy_list(
        &self,
        addr: SocketAddr,
        subject_filter: &str,
        resource_filter: &str,
    ) -> Result<Vec<AclInfo>> {
        let h = AuthListAclsRequest {
            subject_filter: subject_filter.to_owned(),
            resource_filter: resource_filter.to_owned(),
        };
        let body = self
            .auth_call(addr, RequestCode::AuthListAcl, &h, &[])
            .await?;
        if body.is_empty() {
            return Ok(Vec::new());
        }
        Ok(Vec::<AclInfo>::from_json(&body)?)
    }

    async fn auth_call(
        &self,
        addr: SocketAddr,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
    ) -> Result<Vec<u8>> {
        let a = self
            .call(addr, code, header, body)
            .await?
            .expect(&[Status::Success])?;
        Ok(a.body.to_vec())
    }
}
