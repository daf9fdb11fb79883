var K=["gradient","weight","activation","update"];function Y(e){return[...K.filter(n=>e.roles.includes(n)),...e.roles.filter(n=>!K.includes(n))]}var J=["health","mean","std","min","max","max_abs","mean_abs","l2","skewness","kurtosis","zero_fraction","small_fraction","nonfinite","std_rel_first","update_ratio","count"],$e=["no_data","ok","warn","critical"],f=class extends Error{constructor(t,n){super(t),this.name="ApiError",this.status=n}};function R(e){return typeof e=="object"&&e!==null&&!Array.isArray(e)}function Ce(e,t={}){let n=new URLSearchParams(t).toString();return n?`${e}?${n}`:e}async function Z(e,t={},n=(r,o)=>fetch(r,o)){let r=Ce(e,t),o;try{o=await n(r,{headers:{Accept:"application/json"}})}catch(c){throw new f(`Could not reach the server (${String(c instanceof Error?c.message:c)})`,0)}let i=await o.text(),s,a=!0;try{s=JSON.parse(i)}catch{a=!1}let l=R(s)&&typeof s.error=="string"?s.error:null;if(!o.ok)throw new f(l??`${e}: HTTP ${o.status} ${o.statusText}`.trim(),o.status);if(!a)throw new f(`${e}: response is not valid JSON`,o.status);if(l!==null)throw new f(l,o.status);return s}function b(e){return new f(`Malformed response: ${e}`,0)}function I(e){return Array.isArray(e)?e.filter(t=>typeof t=="string"):[]}function Ie(e){if(!R(e)||!Array.isArray(e.runs))throw b('expected {"runs": [...]}');return{runs:e.runs.map((n,r)=>{if(!R(n)||typeof n.run!="string")throw b(`runs[${r}] has no "run" name`);return{run:n.run,layers:Array.isArray(n.layers)?n.layers:[],roles:I(n.roles),scalars:R(n.scalars)?n.scalars:{},unclassified:I(n.unclassified),steps_kept:typeof n.steps_kept=="number"?n.steps_kept:0,last_step:typeof n.last_step=="number"?n.last_step:null}})}}function Ne(e){return e===null||typeof e=="number"}function De(e){if(!R(e))throw b("heatmap is not an object");let{layers:t,steps:n,values:r}=e;if(!Array.isArray(t)||!t.every(h=>typeof h=="string"))throw b("heatmap.layers must be a list of names");if(!Array.isArray(n)||!n.every(h=>typeof h=="number"))throw b("heatmap.steps must be a list of numbers");let o=t.length,i=n.length,s=(h,m,L)=>{if(!Array.isArray(m)||m.length!==o)throw b(`heatmap.${h} must have one row per layer (${o})`);return m.map((p,d)=>{if(!Array.isArray(p)||p.length!==i||!p.every(L))throw b(`heatmap.${h}[${d}] must have one entry per step (${i})`);return p})},a=s("values",r,Ne),l=e.status===void 0||e.status===null?a.map(h=>h.map(m=>m===null?0:1)):s("status",e.status,h=>typeof h=="number"),c=e.rules===void 0||e.rules===null?a.map(h=>h.map(m=>m===null?null:"")):s("rules",e.rules,h=>h===null||typeof h=="string"),g=I(e.status_names);return{run:typeof e.run=="string"?e.run:"",role:typeof e.role=="string"?e.role:"",metric:typeof e.metric=="string"?e.metric:"",layers:t,steps:n,values:a,status:l,status_names:g.length>0?g:$e,quality:typeof e.quality=="string"?e.quality:"",scale:e.scale==="log"?"log":"linear",rules:c}}async function Q(e){return Ie(await Z("runs",{},e))}async function ee(e,t,n,r){return De(await Z("heatmap",{run:e,role:t,metric:n},r))}function u(e,t,n){let r=document.createElement(e);return t&&(r.className=t),n!==void 0&&(r.textContent=n),r}function A(e,t,n){e.replaceChildren(...t.map(o=>new Option(o.text,o.value)));let r=n.find(o=>t.some(i=>i.value===o))??t[0]?.value??"";return e.value=r,e.disabled=t.length===0,r}var N=null;function D(e){N??(N=document.createElement("canvas").getContext("2d"));let t=N;return t?n=>(t.font=e,t.measureText(n).width):n=>n.length*7}function W(e,t){return getComputedStyle(document.body).getPropertyValue(e).trim()||t}function M(e,t=4){if(e==null)return"no data";if(Number.isNaN(e))return"NaN";if(!Number.isFinite(e))return e>0?"+inf":"-inf";if(e===0)return"0";let n=Math.abs(e);if(n>=1e5||n<.001){let[r,o]=e.toExponential(t-1).split("e");return`${We(r)}e${o.replace("+","")}`}return String(Number(e.toPrecision(t)))}function We(e){return e.includes(".")?e.replace(/\.?0+$/,""):e}function k(e){return(e<0?"-":"")+String(Math.abs(Math.trunc(e))).replace(/\B(?=(\d{3})+(?!\d))/g,",")}function te(e,t=1){return t%1e6===0?e===0?"0":`${e/1e6}M`:t%1e3===0?e===0?"0":`${e/1e3}k`:String(e)}function O(e){if(!(e>1))return 1;let t=Math.pow(10,Math.floor(Math.log10(e)));for(let n of[1,2,5,10])if(n*t>=e)return n*t;return 10*t}function ne(e){return O(e*1.5)}function re(e,t){let n=[],r=e.length;if(r===0||!(t>0))return n;let o=0;for(let i=Math.ceil(e[0]/t)*t;i<=e[r-1];i+=t){for(;o<r-1&&e[o+1]<=i;)o++;let s=o<r-1?o+.5+(i-e[o])/(e[o+1]-e[o]):o+.5;n.push({step:i,pos:s})}return n}var Oe=["#440154","#482475","#414487","#355f8d","#2a788e","#21918c","#22a884","#44bf70","#7ad151","#bddf26","#fde725"];function x(e){let t=parseInt(e.slice(1),16);return[t>>16&255,t>>8&255,t&255]}function H(e){return`rgb(${e[0]},${e[1]},${e[2]})`}var Pe=Oe.map(x);function P(e){return e<0?0:e>1?1:e}function oe(e,t){let n=P(t)*(e.length-1),r=Math.min(Math.floor(n),e.length-2),o=n-r,i=e[r],s=e[r+1];return[Math.round(i[0]+(s[0]-i[0])*o),Math.round(i[1]+(s[1]-i[1])*o),Math.round(i[2]+(s[2]-i[2])*o)]}function q(e){return oe(Pe,Number.isNaN(e)?0:e)}function qe(e,t){return typeof e=="number"&&Number.isFinite(e)&&(t==="linear"||e>0)}function F(e,t,n){let r=1/0,o=-1/0;return e.forEach((i,s)=>i.forEach((a,l)=>{!qe(a,t)||n&&n(s,l)||(a<r&&(r=a),a>o&&(o=a))})),r>o?t==="log"?F(e,"linear",n):null:{min:r,max:o,scale:t}}function Fe(e,t){if(typeof e!="number"||!Number.isFinite(e))return null;if(t.scale==="log"){if(e<=0||t.min<=0)return 0;let n=Math.log(t.min),r=Math.log(t.max);return r===n?.5:P((Math.log(e)-n)/(r-n))}return t.max===t.min?.5:P((e-t.min)/(t.max-t.min))}function ie(e,t){return t.scale==="log"&&t.min>0?Math.exp(Math.log(t.min)+(Math.log(t.max)-Math.log(t.min))*e):t.min+(t.max-t.min)*e}var B={no_data:"#9e9e9e",ok:"#1a9e77",warn:"#f5a623",critical:"#d7263d"},G=B.no_data,S={no_data:"no data",ok:"ok",warn:"warn",critical:"critical"};function E(e,t){return typeof e!="number"||e<0||e>=t.length?"no_data":t[e]}function z(e){return B[e]??G}var j=[{status:"critical",lo:0,hi:1/3,from:x("#a50f15"),to:x("#e5484d")},{status:"warn",lo:1/3,hi:2/3,from:x("#e8850c"),to:x("#f9c74f")},{status:"ok",lo:2/3,hi:1,from:x("#9fd8b9"),to:x(B.ok)}];function Be(e,t){let n=j.find(o=>o.status===t);if(!n||typeof e!="number"||!Number.isFinite(e))return null;let r=(Math.min(Math.max(e,n.lo),n.hi)-n.lo)/(n.hi-n.lo);return oe([n.from,n.to],r)}function Ge(e,t){if(!t)return null;let n=Fe(e,t);return n===null?null:q(n)}function se(e,t,n,r){return n==="no_data"||t===null||t===void 0?null:e==="health"?Be(t,n):Ge(t,r)}var ze=1,ae=48,je=16,le=28,Xe=26,ce=12,ue=16384,Ve=64*1024*1024;function X(e,t,n){return Math.min(Math.max(e,t),n)}function he(e){let t=Math.max(0,Math.floor(e.rows)),n=Math.max(0,Math.floor(e.cols)),r=n>0?X(e.availableWidth/n,ze,ae):ae,o=t>0?X(Math.floor(e.availableHeight/t),je,le):le;return{rows:t,cols:n,cellW:r,cellH:o,axisH:Xe,plotW:r*n,plotH:o*t}}function pe(e,t,n){let r=Math.max(1,e),o=Math.max(1,t),i=n>0&&Number.isFinite(n)?n:1;return Math.min(i,ue/r,ue/o,Math.sqrt(Ve/(r*o)))}function _(e,t,n){return Math.round(e*t*n)}function ge(e,t,n){let r=t-n.axisH;if(e<0||r<0||e>=n.plotW||r>=n.plotH)return null;let o=Math.min(n.cols-1,Math.floor(e/n.cellW)),i=Math.min(n.rows-1,Math.floor(r/n.cellH));return o>=0&&i>=0?{row:i,col:o}:null}function me(e,t,n,r,o){let i=te(e,t),s=o(i),a=Math.max(0,Math.min(n-s/2,r-s));return{step:e,text:i,left:a,width:s,tick:n}}function Ue(e,t=ce){for(let n=1;n<e.length;n++){let r=e[n-1];if(e[n].left<r.left+r.width+t)return!0}return!1}function Ke(e,t,n,r){let o=e.length*t,i=[],s=-1/0;return e.forEach((a,l)=>{let c=me(a,1,(l+.5)*t,o,n);c.left>=s&&(i.push(c),s=c.left+c.width+r)}),i}function de(e,t,n,r=ce){let o=e.length;if(o===0)return[];let i=o*t,s=e.every((a,l)=>l===0||a>e[l-1]);if(o>1&&s&&e.every(Number.isInteger)){let a=e[o-1]-e[0],l=Math.max(n(String(e[0])),n(String(e[o-1]))),c=O(a/Math.max(1,Math.floor(i/(l+r))));for(;;){let g=re(e,c).map(h=>me(h.step,c,h.pos*t,i,n));if(g.length===0)break;if(!Ue(g,r))return g;if(g.length===1)break;c=ne(c)}}return Ke(e,t,n,r)}function fe(e,t,n){if(n(e)<=t)return e;let r=Array.from(e),o=a=>{let l=Math.floor(a/3),c=a-l;return r.slice(0,l).join("")+"\u2026"+r.slice(r.length-c).join("")},i=0,s=r.length-1;for(;i<s;){let a=Math.ceil((i+s)/2);n(o(a))<=t?i=a:s=a-1}return o(i)}var Ye=80,Je=280,be=16;function xe(e,t){let n=e.reduce((r,o)=>Math.max(r,t(o)),0);return Math.ceil(X(n+be,Ye,Je))}function ye(e){return e-be}var we="Roboto, sans-serif",Ze=`12px ${we}`,ve=`11px ${we}`;function Me(e){return e.metric==="health"?null:F(e.values,e.scale,(t,n)=>E(e.status[t][n],e.status_names)==="no_data")}var $=class{constructor(t){this.data=null;this.domain=null;this.grid=null;this.tooltip=t,this.root=u("div","gh-heatmap"),this.labelColumn=u("div","gh-rowlabels"),this.scroller=u("div","gh-scroller"),this.canvas=u("canvas","gh-canvas"),this.highlight=u("div","gh-highlight"),this.highlight.hidden=!0,this.scroller.append(this.canvas,this.highlight),this.root.append(this.labelColumn,this.scroller),this.canvas.addEventListener("mousemove",n=>this.onHover(n)),this.canvas.addEventListener("mouseleave",()=>this.hideHover()),this.scroller.addEventListener("scroll",()=>this.hideHover())}show(t,n){this.data=t,this.domain=n,this.hideHover(),this.draw()}clear(){this.data=null,this.grid=null,this.hideHover(),this.labelColumn.replaceChildren(),this.canvas.width=0,this.canvas.height=0}draw(){let t=this.data;if(!t)return;let n=D(Ze),r=D(ve),o=xe(t.layers,n),i=this.root.getBoundingClientRect().top,s=he({rows:t.layers.length,cols:t.steps.length,availableWidth:Math.max(100,this.root.clientWidth-o-2),availableHeight:Math.max(100,window.innerHeight-i-40)});this.grid=s;let a=de(t.steps,s.cellW,r),l=Math.ceil(Math.max(s.plotW,...a.map(g=>g.left+g.width))),c=Math.ceil(s.axisH+s.plotH);this.drawRowLabels(t.layers,o,s,n),this.paint(t,s,a,l,c)}drawRowLabels(t,n,r,o){this.labelColumn.style.width=`${n}px`;let i=u("div","gh-axis-title","step");i.style.height=`${r.axisH}px`,i.style.lineHeight=`${r.axisH}px`;let s=ye(n),a=t.map(l=>{let c=u("div","gh-rowlabel",fe(l,s,o));return c.title=l,c.style.height=`${r.cellH}px`,c.style.lineHeight=`${r.cellH}px`,c});this.labelColumn.replaceChildren(i,...a)}paint(t,n,r,o,i){let s=pe(o,i,window.devicePixelRatio||1),a=this.canvas;a.width=Math.max(1,Math.round(o*s)),a.height=Math.max(1,Math.round(i*s)),a.style.width=`${o}px`,a.style.height=`${i}px`;let l=a.getContext("2d");if(!l)return;l.setTransform(1,0,0,1,0,0),l.clearRect(0,0,a.width,a.height);let c=new Map,g=p=>{if(!p)return G;let d=p[0]<<16|p[1]<<8|p[2],v=c.get(d);return v===void 0&&(v=H(p),c.set(d,v)),v},h=Math.round(n.axisH*s),m=n.cellW*s>=6?1:0,L=n.cellH*s>=6?1:0;for(let p=0;p<n.rows;p++){let d=h+_(p,n.cellH,s),v=h+_(p+1,n.cellH,s),Ae=t.values[p],ke=t.status[p];for(let w=0;w<n.cols;w++){let C=_(w,n.cellW,s),U=_(w+1,n.cellW,s);if(U<=C)continue;let Ee=E(ke[w],t.status_names);l.fillStyle=g(se(t.metric,Ae[w],Ee,this.domain)),l.fillRect(C,d,Math.max(1,U-C-m),Math.max(1,v-d-L))}}l.setTransform(s,0,0,s,0,0),l.font=ve,l.textBaseline="alphabetic",l.textAlign="left",l.fillStyle=W("--gh-muted","#616161"),l.strokeStyle=W("--gh-border","#bdbdbd"),l.lineWidth=1,l.beginPath();for(let p of r){let d=Math.round(p.tick*s)/s+.5/s;l.moveTo(d,n.axisH-6),l.lineTo(d,n.axisH-1),l.fillText(p.text,p.left,n.axisH-9)}l.stroke()}onHover(t){let n=this.data,r=this.grid;if(!n||!r)return;let o=this.canvas.getBoundingClientRect(),i=ge(t.clientX-o.left,t.clientY-o.top,r);if(!i){this.hideHover();return}let{row:s,col:a}=i,l=E(n.status[s][a],n.status_names),c=n.rules[s][a],g=[["layer",n.layers[s]],["step",k(n.steps[a])],[n.metric==="health"?"score":n.metric,M(n.values[s][a])],["quality",n.quality||"unknown"],["status",(S[l]??l)+(c?` (${c})`:"")]];this.tooltip.replaceChildren(...g.map(([m,L])=>{let p=u("div","gh-tip-line");return p.append(u("span","gh-tip-key",m),u("span","gh-tip-value",L)),p})),this.tooltip.hidden=!1,this.placeTooltip(t.clientX,t.clientY);let h=this.highlight;h.hidden=!1,h.style.left=`${a*r.cellW}px`,h.style.top=`${r.axisH+s*r.cellH}px`,h.style.width=`${Math.max(r.cellW,3)}px`,h.style.height=`${r.cellH}px`}placeTooltip(t,n){let r=this.tooltip,o=12,i=r.offsetWidth,s=r.offsetHeight,a=t+o+i>window.innerWidth?Math.max(0,t-o-i):t+o,l=n+o+s>window.innerHeight?Math.max(0,n-o-s):n+o;r.style.left=`${a}px`,r.style.top=`${l}px`}hideHover(){this.tooltip.hidden=!0,this.highlight.hidden=!0}};function Qe(e,t=11){let n=[];for(let r=0;r<t;r++){let o=r/(t-1);n.push(`${H(e(o))} ${Math.round(o*100)}%`)}return`linear-gradient(to right, ${n.join(", ")})`}function et(){let e=n=>`${+(n*100).toFixed(2)}%`;return`linear-gradient(to right, ${j.flatMap(n=>[`${H(n.from)} ${e(n.lo)}`,`${H(n.to)} ${e(n.hi)}`]).join(", ")})`}function He(e,t){let n=u("span","gh-legend-item"),r=u("span","gh-swatch");return r.style.background=e,n.append(r,u("span","",t)),n}function Le(e,t,n,r,o){let i=u("span","gh-legend-item"),s=u("span","gh-gradient");return s.style.background=t,o!==void 0&&s.append(u("span","gh-gradient-mid",o)),i.append(u("span","gh-legend-title",e),u("span","gh-legend-value",n),s,u("span","gh-legend-value",r)),i}function Re(e,t){let n=u("div","gh-legend");if(e.metric==="health"){for(let i of["ok","warn","critical","no_data"])n.append(He(z(i),S[i]));return n.append(Le("score",et(),"0","1")),n}let o=(t?.scale??e.scale)==="log"?`${e.metric} (log scale)`:e.metric;if(t){let i=t.scale==="log"?M(ie(.5,t),3):void 0;n.append(Le(o,Qe(q),M(t.min),M(t.max),i))}else n.append(u("span","gh-legend-title",o),u("span","","has no values here"));return n.append(He(z("no_data"),S.no_data)),n}var tt=`
:root {
  --gh-bg: #ffffff;
  --gh-fg: #212121;
  --gh-muted: #616161;
  --gh-border: #d0d0d0;
  --gh-panel: #f5f5f5;
  --gh-accent: #f57c00;
  --gh-error-bg: #fdecea;
  --gh-error-fg: #b71c1c;
  --gh-tip-bg: rgba(33, 33, 33, 0.94);
  --gh-tip-fg: #ffffff;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root {
    --gh-bg: #202124;
    --gh-fg: #e8eaed;
    --gh-muted: #b0b3b8;
    --gh-border: #5f6368;
    --gh-panel: #2d2e31;
    --gh-accent: #ffa726;
    --gh-error-bg: #4a1c1c;
    --gh-error-fg: #ffb4ab;
    --gh-tip-bg: rgba(248, 249, 250, 0.96);
    --gh-tip-fg: #202124;
  }
}
html, body {
  margin: 0;
  background: var(--gh-bg);
  color: var(--gh-fg);
  font: 13px Roboto, sans-serif;
}
.gh-app { padding: 12px 16px 24px; }
.gh-toolbar {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 8px 20px;
  margin-bottom: 12px;
}
.gh-toolbar label { display: inline-flex; align-items: center; gap: 6px; color: var(--gh-muted); }
.gh-toolbar select {
  font: inherit;
  color: var(--gh-fg);
  background: var(--gh-bg);
  border: 1px solid var(--gh-border);
  border-radius: 4px;
  padding: 3px 6px;
  max-width: 320px;
}
.gh-toolbar select:focus { outline: 2px solid var(--gh-accent); outline-offset: 1px; }
.gh-summary { color: var(--gh-muted); margin-left: auto; }
.gh-message {
  padding: 12px 14px;
  border-radius: 4px;
  background: var(--gh-panel);
  line-height: 1.5;
  max-width: 820px;
  margin-bottom: 12px;
}
.gh-message p { margin: 0 0 6px; }
.gh-message p:last-child { margin-bottom: 0; }
.gh-message code { font-family: "Roboto Mono", monospace; font-size: 12px; }
.gh-message.gh-error { background: var(--gh-error-bg); color: var(--gh-error-fg); }
.gh-message.gh-loading { background: none; color: var(--gh-muted); padding-left: 0; }
.gh-legend {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 6px 16px;
  margin-bottom: 10px;
  color: var(--gh-muted);
}
.gh-legend-item { display: inline-flex; align-items: center; gap: 6px; }
.gh-legend-title { color: var(--gh-fg); }
.gh-legend-value { font-variant-numeric: tabular-nums; }
.gh-swatch { width: 12px; height: 12px; border-radius: 2px; display: inline-block; }
.gh-gradient {
  position: relative;
  display: inline-block;
  width: 160px;
  height: 12px;
  border-radius: 2px;
}
.gh-gradient-mid {
  position: absolute;
  left: 50%;
  top: 14px;
  transform: translateX(-50%);
  font-size: 11px;
  white-space: nowrap;
}
.gh-heatmap { display: flex; align-items: flex-start; }
.gh-heatmap[hidden] { display: none; }
.gh-heatmap.gh-stale { opacity: 0.5; }
.gh-rowlabels { flex: none; font-size: 12px; }
.gh-rowlabel {
  white-space: nowrap;
  overflow: hidden;
  text-align: right;
  padding-right: 8px;
  box-sizing: border-box;
}
.gh-axis-title {
  text-align: right;
  padding-right: 8px;
  font-size: 11px;
  color: var(--gh-muted);
  box-sizing: border-box;
}
.gh-scroller { position: relative; flex: 1 1 auto; min-width: 0; overflow-x: auto; overflow-y: hidden; }
.gh-canvas { display: block; }
.gh-highlight {
  position: absolute;
  box-sizing: border-box;
  border: 2px solid var(--gh-fg);
  pointer-events: none;
}
.gh-tooltip {
  position: fixed;
  z-index: 10;
  pointer-events: none;
  background: var(--gh-tip-bg);
  color: var(--gh-tip-fg);
  border-radius: 4px;
  padding: 6px 8px;
  font-size: 12px;
  line-height: 1.45;
  max-width: 420px;
  box-shadow: 0 2px 6px rgba(0, 0, 0, 0.3);
}
.gh-tooltip[hidden] { display: none; }
.gh-tip-line { display: flex; gap: 8px; }
.gh-tip-key { opacity: 0.7; min-width: 52px; }
.gh-tip-value { overflow-wrap: anywhere; }
`;function Se(e){if(e.getElementById("gradhealth-styles"))return;let t=e.createElement("style");t.id="gradhealth-styles",t.textContent=tt,e.head.append(t)}function y(e){return u("code","",e)}function T(...e){let t=u("p");return t.append(...e),t}function _e(e){return e instanceof f?e.message:`Unexpected error: ${e instanceof Error?e.message:String(e)}`}function Te(){return[T("No per-layer histograms found in the log directory."),T("Gradient Health reads weight and gradient histograms. Log them every few steps: ","in TensorFlow with ",y("tf.summary.histogram(name, values, step=step)")," (or ",y("tf.keras.callbacks.TensorBoard(histogram_freq=1)"),"), in PyTorch with ",y("SummaryWriter.add_histogram(name, tensor, step)")," for each parameter and its ",y(".grad"),".")]}function nt(e){let t=[T("Run ",y(e.run)," has no weight or gradient histograms that match a layer.")];if(e.unclassified.length>0){let n=e.unclassified.slice(0,10).join(", "),r=e.unclassified.length>10?` and ${e.unclassified.length-10} more`:"";t.push(T(`Histogram tags that could not be assigned a role: ${n}${r}.`))}return t.push(...Te().slice(1)),t}var V=class{constructor(t){this.runSelect=u("select");this.roleSelect=u("select");this.metricSelect=u("select");this.info=u("span","gh-summary");this.message=u("div","gh-message");this.legendSlot=u("div");this.tooltip=u("div","gh-tooltip");this.view=new $(this.tooltip);this.runs=[];this.requestId=0;let n=u("div","gh-app"),r=u("div","gh-toolbar"),o=(s,a)=>{let l=u("label","",s);return l.append(a),l};r.append(o("Run",this.runSelect),o("Role",this.roleSelect),o("Metric",this.metricSelect),this.info),this.tooltip.hidden=!0,this.tooltip.setAttribute("role","tooltip"),n.append(r,this.message,this.legendSlot,this.view.root),t.replaceChildren(n,this.tooltip),A(this.metricSelect,J.map(s=>({value:s,text:s})),["health"]),this.runSelect.addEventListener("change",()=>this.onRunChange()),this.roleSelect.addEventListener("change",()=>{this.load()}),this.metricSelect.addEventListener("change",()=>{this.load()});let i=0;window.addEventListener("resize",()=>{cancelAnimationFrame(i),i=requestAnimationFrame(()=>this.view.draw())})}setMessage(t,n=[]){this.message.hidden=t===null,this.message.className=`gh-message gh-${t??"none"}`,this.message.replaceChildren(...n)}showHeatmap(t){this.view.root.hidden=!t,this.legendSlot.hidden=!t,t||this.view.clear()}async start(){this.showHeatmap(!1),this.setMessage("loading",["Loading runs\u2026"]);try{this.runs=(await Q()).runs}catch(t){this.disablePickers(),this.setMessage("error",[_e(t)]);return}if(this.runs.length===0){this.disablePickers(),this.setMessage("info",Te());return}A(this.runSelect,this.runs.map(t=>({value:t.run,text:t.run})),[]),this.onRunChange()}disablePickers(){for(let t of[this.runSelect,this.roleSelect,this.metricSelect])t.disabled=!0}currentRun(){return this.runs.find(t=>t.run===this.runSelect.value)}onRunChange(){let t=this.currentRun();t&&(A(this.roleSelect,Y(t).map(n=>({value:n,text:n})),[this.roleSelect.value,"gradient"]),this.load())}async load(){let t=this.currentRun(),n=++this.requestId;if(!t)return;let r=this.roleSelect.value,o=this.metricSelect.value;if(!r){this.info.textContent="",this.showHeatmap(!1),this.setMessage("info",nt(t));return}this.view.root.classList.add("gh-stale"),this.info.textContent="Loading\u2026";let i;try{i=await ee(t.run,r,o)}catch(a){if(n!==this.requestId)return;this.info.textContent="",this.showHeatmap(!1),this.setMessage("error",[_e(a)]);return}finally{n===this.requestId&&this.view.root.classList.remove("gh-stale")}if(n!==this.requestId)return;if(this.info.textContent=[`${i.layers.length} layers`,`${i.steps.length} steps`,i.steps.length>0?`last step ${k(i.steps[i.steps.length-1])}`:"",i.quality?`quality: ${i.quality}`:""].filter(Boolean).join(" \xB7 "),i.layers.length===0||i.steps.length===0){this.showHeatmap(!1),this.setMessage("info",[T("No ",y(r)," data for run ",y(t.run)," yet.")]);return}this.setMessage(null);let s=Me(i);this.legendSlot.replaceChildren(Re(i,s)),this.showHeatmap(!0),this.view.show(i,s)}};function Rt(){Se(document),new V(document.body).start()}export{Rt as render};
